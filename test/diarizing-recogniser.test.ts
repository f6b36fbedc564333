import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  conversation,
  startDiarizingRecognizer,
  voice,
  type DiarizingRecognizer,
} from './support/diarizing-recognizer.ts';
import { startHarness, uploadMeeting, waitFor, waitForMeeting, type Harness } from './support/harness.ts';
import { encodeWav, parseWav } from '../src/domain/wav.ts';

interface Line {
  startMs: number;
  endMs: number;
  text: string;
  speaker: { id: string; name: string; source: string } | null;
}

const ANN = 1_000;
const BOB = 2_000;
const silence = (ms: number) => voice(0, ms);
/** Ann, Bob, Ann, each in a window of their own (the tests cut 3 s windows), Bob again with Ann. */
const MEETING = conversation([
  voice(ANN, 2_000),
  silence(1_000),
  voice(BOB, 2_000),
  silence(1_000),
  voice(ANN, 1_600),
  silence(400),
  voice(BOB, 800),
  silence(1_000),
]);

/** The speaker a segment's audio came from, by its level (`s<level>x<samples>`). */
const levelOf = (l: Line) => Number(/^s(\d+)x/.exec(l.text)?.[1]);

async function transcribed(h: Harness): Promise<{ id: string; lines: Line[] }> {
  // W7: the workspace's words, for a recogniser that takes a prompt.
  const set = await h.request('PUT', '/v1/vocabulary', { terms: ['Kysely', ' Verbatim ', 'kysely'] });
  assert.equal(set.status, 200, set.text);
  assert.deepEqual(set.json.terms, ['Kysely', 'Verbatim']);
  const id = await uploadMeeting(h, MEETING, 'diarized');
  const meeting = await waitForMeeting(h, id);
  assert.equal(meeting.status, 'complete');
  const lines = (await h.request('GET', `/v1/meetings/${id}/transcript`)).json.segments as Line[];
  assert.ok(lines.length >= 4, JSON.stringify(lines));
  return { id, lines };
}

for (const format of ['verbose_json', 'diarized_json'] as const) {
  void describe(`a diarizing recogniser, ${format} (W3, W7)`, () => {
    let fake: DiarizingRecognizer;
    let h: Harness;
    before(async () => {
      fake = await startDiarizingRecognizer();
      h = await startHarness({
        env: {
          VERBATIM_ASR: 'whisper',
          VERBATIM_WHISPER_URL: fake.url,
          VERBATIM_WHISPER_FORMAT: format,
          // One window at a time, in order: what a window learns, the next is told.
          VERBATIM_TRANSCRIPTION_CONCURRENCY: '1',
        },
      });
      h.spawnWorker();
    });
    after(async () => {
      await h?.close();
      await fake?.close();
    });

    if (format === 'verbose_json')
      void it('W3/W7: segment speakers are read; a server that diarizes each window apart gives speakers of one window, and the API says so', async () => {
        const { id, lines } = await transcribed(h);
        assert.ok(lines.every((l) => l.speaker?.source === 'recogniser'));
        // Within a window, one voice is one speaker and two voices two: never mixed.
        const byWindow = new Map<string, Map<number, string>>();
        for (const l of lines) {
          const window = String(Math.floor(l.startMs / 3_000));
          const seen = byWindow.get(window) ?? new Map<number, string>();
          const before = seen.get(levelOf(l));
          if (before) assert.equal(l.speaker!.id, before, 'one voice, one speaker, within a window');
          seen.set(levelOf(l), l.speaker!.id);
          byWindow.set(window, seen);
        }
        const speakers = (await h.request('GET', `/v1/meetings/${id}/speakers`)).json.speakers as Array<{
          scope: string;
          source: string;
        }>;
        assert.ok(speakers.length >= 3, 'the same voice in other windows is another speaker, not a guess');
        assert.ok(speakers.every((s) => s.scope === 'window' && s.source === 'recogniser'));
        assert.ok(fake.requests.every((r) => r.format === 'verbose_json' && r.knownNames.length === 0));
        // W7: the vocabulary went with every window as the prompt.
        assert.ok(
          fake.requests.every((r) => r.prompt === 'Glossary: Kysely, Verbatim.'),
          JSON.stringify(fake.requests),
        );
        assert.equal((await h.request('GET', '/v1/vocabulary')).json.applied, true);
        const bad = await h.request('PUT', '/v1/vocabulary', { terms: ['ok', 'x'.repeat(65)] });
        assert.equal(bad.status, 400);
        assert.equal(bad.json.error.code, 'vocabulary.terms');
        assert.deepEqual(
          (await h.request('GET', '/v1/vocabulary')).json.terms,
          ['Kysely', 'Verbatim'],
          'nothing changed',
        );
      });
    else
      void it('W3/W7: diarized_json keeps a speaker across windows with reference clips of the voices already heard, and sends no prompt', async () => {
        const { id, lines } = await transcribed(h);
        const ids = new Map<number, Set<string>>();
        for (const l of lines) ids.set(levelOf(l), (ids.get(levelOf(l)) ?? new Set()).add(l.speaker!.id));
        assert.deepEqual(
          [...ids.entries()].map(([level, set]) => [level, set.size]).sort(),
          [
            [ANN, 1],
            [BOB, 1],
          ],
          `one speaker per voice across every window: ${JSON.stringify(lines)}`,
        );
        assert.notEqual([...ids.get(ANN)!][0], [...ids.get(BOB)!][0]);
        const speakers = (await h.request('GET', `/v1/meetings/${id}/speakers`)).json.speakers as Array<{
          scope: string;
        }>;
        assert.equal(speakers.length, 2);
        assert.ok(speakers.every((s) => s.scope === 'meeting'));
        assert.ok(
          fake.requests.some((r) => r.knownNames.length > 0),
          'later windows named the voices heard',
        );
        // A diarizing model refuses a prompt: the vocabulary is kept, not sent, and the API says so.
        assert.ok(fake.requests.every((r) => r.prompt === null));
        const vocabulary = (await h.request('GET', '/v1/vocabulary')).json;
        assert.equal(vocabulary.applied, false);
        assert.match(vocabulary.note, /not used/);
        // Once the meeting's audio is gone, so are the clips of its voices.
        await waitFor("the voices' clips to go with the audio", async () => {
          const kept = await h.app.database.db
            .selectFrom('speakers')
            .select('reference')
            .where('meeting_id', '=', id)
            .where('reference', 'is not', null)
            .execute();
          return kept.length === 0;
        });
      });

    void it(`W3: a live meeting's late chunk, repaired in after completion, keeps its words' speakers (${format})`, async () => {
      const audio = parseWav(MEETING)!;
      const size = 2 * 16_000;
      const chunks: Buffer[] = [];
      for (let i = 0; i < audio.samples.length; i += size)
        chunks.push(encodeWav(audio.samples.subarray(i, i + size), 16_000));
      const id = (await h.request('POST', '/v1/meetings', { source: 'live', title: 'diarized live' })).json
        .id as string;
      const late = 2;
      for (const [seq, c] of chunks.entries())
        if (seq !== late) {
          const put = await h.request('PUT', `/v1/meetings/${id}/chunks/${seq}`, c, {
            'content-type': 'audio/wav',
          });
          assert.equal(put.status, 201, put.text);
        }
      assert.equal((await h.request('POST', `/v1/meetings/${id}/end`)).status, 202);
      assert.equal((await waitForMeeting(h, id)).status, 'complete');
      const put = await h.request('PUT', `/v1/meetings/${id}/chunks/${late}`, chunks[late], {
        'content-type': 'audio/wav',
      });
      assert.equal(put.status, 201, put.text);
      await waitFor('the late chunk repaired in', async () => {
        const m = (await h.request('GET', `/v1/meetings/${id}`)).json;
        return m.revision >= 1 && !m.lateAudio.repairing && m.lateAudio.lateChunks === 0 ? m : null;
      });
      const lines = (await h.request('GET', `/v1/meetings/${id}/transcript`)).json.segments as Line[];
      assert.ok(lines.length >= 4, JSON.stringify(lines));
      assert.ok(
        lines.every((l) => l.speaker !== null),
        `every word of the re-cut windows has its speaker: ${JSON.stringify(lines)}`,
      );
    });
  });
}
