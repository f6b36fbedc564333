import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { dropEchoes, type EnergySpan } from '../src/domain/tracks.ts';
import { encodeWav } from '../src/domain/wav.ts';
import { energyProfile } from '../src/domain/timeline.ts';
import { conversationWav, startHarness, waitFor, waitForMeeting, type Harness } from './support/harness.ts';
import {
  coverage,
  markedChunk,
  startChunkRecognizer,
  type ChunkRecognizer,
} from './support/chunk-recognizer.ts';
import { conversationVoices, withBleed } from './support/channels.ts';

/** A track's energy as the server keeps it (per 10 ms step, src/domain/timeline.ts). */
function spanOf(startMs: number, samples: Int16Array): EnergySpan {
  return { startMs, lengthMs: (samples.length * 1000) / 16_000, energy: energyProfile(samples) };
}

const tone = (amp: number, n: number) =>
  Int16Array.from({ length: n }, (_, i) => Math.round(amp * Math.sin((2 * Math.PI * 220 * i) / 16_000)));

void describe('two tracks (L25)', () => {
  void it('L25: the echo rule shows a word once, on the track that dominates; crosstalk and unknown energy keep both', () => {
    // 0–1 s the tab speaks (mic hears it at 10 %); 1–2 s the user speaks; 2–3 s both at similar levels.
    const second = 16_000;
    const tab = new Int16Array(3 * second);
    const mic = new Int16Array(3 * second);
    tab.set(tone(8_000, second), 0);
    mic.set(tone(800, second), 0);
    mic.set(tone(8_000, second), second);
    tab.set(tone(6_000, second), 2 * second);
    mic.set(tone(7_000, second), 2 * second);
    const word = (startMs: number, text: string) => ({ startMs, endMs: startMs + 400, text });
    const seg = (startMs: number, text: string) => ({
      startMs,
      endMs: startMs + 900,
      text: `${text} ${text}2`,
      speakerKey: null,
      words: [word(startMs, text), word(startMs + 450, `${text}2`)],
    });
    const out = dropEchoes([
      {
        track: 'mic',
        segments: [seg(50, 'echo'), seg(1_050, 'mine'), seg(2_050, 'both')],
        spans: [spanOf(0, mic)],
      },
      { track: 'tab', segments: [seg(50, 'theirs'), seg(2_050, 'also')], spans: [spanOf(0, tab)] },
    ]);
    const shown = out.segments.map((s) => `${s.track}:${s.text}`);
    assert.deepEqual(shown, ['tab:theirs theirs2', 'mic:mine mine2', 'mic:both both2', 'tab:also also2']);
    assert.equal(out.dropped, 2, 'the echo words of the tab in the microphone');
    // No energy known for the microphone: nothing is dropped on a guess.
    const unknown = dropEchoes([
      { track: 'mic', segments: [seg(50, 'echo')], spans: [{ startMs: 0, lengthMs: 3_000, energy: null }] },
      { track: 'tab', segments: [seg(50, 'theirs')], spans: [spanOf(0, tab)] },
    ]);
    assert.equal(unknown.dropped, 0);
    assert.equal(unknown.segments.length, 2);
    // Without word times a segment is decided whole: one that is only echo goes; one holding the
    // person's own second after two of echo stays (an echo shown twice, not a word lost).
    const tail = new Int16Array(3 * second);
    tail.set(tone(800, 2 * second), 0);
    tail.set(tone(8_000, second), 2 * second);
    const call = new Int16Array(3 * second);
    call.set(tone(8_000, 2 * second), 0);
    const whole = (startMs: number, endMs: number, text: string) => ({
      startMs,
      endMs,
      text,
      speakerKey: null,
      words: null,
    });
    const wholes = dropEchoes([
      { track: 'mic', segments: [whole(0, 3_000, 'echo then yes we ship')], spans: [spanOf(0, tail)] },
      { track: 'tab', segments: [whole(0, 2_000, 'theirs')], spans: [spanOf(0, call)] },
    ]);
    assert.deepEqual(wholes.segments.map((s) => s.text).sort(), ['echo then yes we ship', 'theirs']);
    const echoOnly = dropEchoes([
      { track: 'mic', segments: [whole(0, 2_000, 'echo only')], spans: [spanOf(0, tail)] },
      { track: 'tab', segments: [whole(0, 2_000, 'theirs')], spans: [spanOf(0, call)] },
    ]);
    assert.deepEqual(
      echoOnly.segments.map((s) => s.text),
      ['theirs'],
    );
    // A track ten days along the timeline costs what its words cost, not what the days would.
    const far = 10 * 86_400_000;
    const t0 = performance.now();
    const distant = dropEchoes([
      { track: 'mic', segments: [seg(50, 'mine')], spans: [spanOf(0, mic)] },
      { track: 'tab', segments: [seg(far + 50, 'theirs')], spans: [spanOf(far, tab)] },
    ]);
    assert.equal(distant.segments.length, 2);
    assert.ok(performance.now() - t0 < 1_000, 'decided on the words’ frames alone');
  });

  let recognizer: ChunkRecognizer;
  let h: Harness;
  before(async () => {
    recognizer = await startChunkRecognizer();
    h = await startHarness({
      env: {
        VERBATIM_ASR: 'whisper',
        VERBATIM_WHISPER_URL: recognizer.url,
        VERBATIM_WINDOW_SECONDS: '8',
        VERBATIM_BOUNDARY_SEARCH_SECONDS: '2',
        VERBATIM_CHUNK_SECONDS: '5',
        VERBATIM_GAP_PATIENCE_SECONDS: '0',
        VERBATIM_CLOSEOUT_GRACE_SECONDS: '1',
      },
    });
    h.spawnWorker();
  });
  after(async () => {
    await h?.close();
    await recognizer?.close();
  });

  void it('L25: a two-track live meeting sent shuffled, with the tab’s chunks after End and after completion, loses no sample on either track', async () => {
    const created = await h.request('POST', '/v1/meetings', { source: 'live', title: 'call in a tab' });
    const id = created.json.id as string;
    // The microphone: chunks 0–3 (marks c0–c3) over 0–20 s; the tab: chunks 0–3 (marks c10–c13)
    // from 20 s, so each track's every sample can be counted in the one transcript.
    const mic = (seq: number) =>
      h.request('PUT', `/v1/meetings/${id}/chunks/${seq}`, markedChunk(seq), { 'content-type': 'audio/wav' });
    const tab = (seq: number) =>
      h.request(
        'PUT',
        `/v1/meetings/${id}/chunks/${seq}?track=tab&trackOffsetMs=20000`,
        markedChunk(seq + 10),
        {
          'content-type': 'audio/wav',
        },
      );
    for (const put of [mic(2), tab(1), mic(0), mic(3), tab(0), mic(1)]) {
      const res = await put;
      assert.equal(res.status, 201, res.text);
      assert.equal(res.json.meeting.id, id, 'the answer shows the meeting, not the track');
    }
    const view = (await h.request('GET', `/v1/meetings/${id}`)).json;
    assert.equal(view.tracks.length, 1);
    assert.equal(view.tracks[0].track, 'tab');
    assert.equal(view.tracks[0].offsetMs, 20_000);
    // A track is part of its meeting, not a meeting of its own in the list.
    const list = (await h.request('GET', '/v1/meetings?limit=100')).json.meetings as Array<{ id: string }>;
    const trackId = view.tracks[0].meetingId as string;
    assert.ok(list.some((m) => m.id === id));
    assert.ok(!list.some((m) => m.id === trackId));

    // End names the tab's count; its offset, left out, is the one its chunks gave.
    const ended = await h.request('POST', `/v1/meetings/${id}/end`, {
      chunks: 4,
      tracks: { tab: { chunks: 4 } },
    });
    assert.equal(ended.status, 202, ended.text);
    // After End: the tab's chunk 2 (within the grace); chunk 3 only after the meeting completed.
    assert.equal((await tab(2)).status, 201);
    const done = await waitForMeeting(h, id);
    assert.equal(done.status, 'complete', JSON.stringify(done));
    const late = await tab(3);
    assert.equal(late.status, 201, late.text);
    await waitFor('the late chunk of the tab to revise the meeting', async () => {
      const m = (await h.request('GET', `/v1/meetings/${id}`)).json;
      return m.revision >= 1 && !m.lateAudio.repairing && m.lateAudio.lateChunks === 0 ? m : null;
    });
    const t = (await h.request('GET', `/v1/meetings/${id}/transcript`)).json;
    const { samples, order } = coverage(t.segments);
    for (const mark of [0, 1, 2, 3, 10, 11, 12, 13]) {
      assert.equal(samples.get(mark), 80_000, `every sample of c${mark} once: ${JSON.stringify(t.segments)}`);
    }
    assert.deepEqual([...new Set(order)], [0, 1, 2, 3, 10, 11, 12, 13], 'interleaved by time');
    const lines = t.segments as Array<{ speaker: { name: string } | null }>;
    const names = new Set(lines.map((s) => s.speaker?.name));
    assert.deepEqual([...names].sort(), ['Others', 'You']);
    for (const s of t.segments as Array<{ startMs: number; text: string; speaker: { name: string } }>) {
      assert.equal(s.speaker.name, /^c1\d/.test(s.text) ? 'Others' : 'You', s.text);
    }
    // A track is not its own webhook subject: the meeting's events name the meeting.
    const events = await h.app.database.db
      .selectFrom('outbox')
      .select(['event_type', 'subject_id'])
      .where('subject_id', '=', view.tracks[0].meetingId)
      .execute();
    assert.deepEqual(events, []);
    const revised = await h.app.database.db
      .selectFrom('outbox')
      .select('event_type')
      .where('subject_id', '=', id)
      .where('event_type', '=', 'meeting.transcript_revised')
      .execute();
    assert.ok(revised.length >= 1, 'the tab’s late chunk revised the meeting');

    // What is wrong with a track is said in a 4xx, and nothing stored is lost.
    const bad = await h.request(
      'PUT',
      `/v1/meetings/${id}/chunks/9?track=Tab!&trackOffsetMs=0`,
      markedChunk(1),
      {
        'content-type': 'audio/wav',
      },
    );
    assert.equal(bad.status, 400);
    assert.equal(bad.json.error.code, 'track.name');
    const moved = await h.request(
      'PUT',
      `/v1/meetings/${id}/chunks/3?track=tab&trackOffsetMs=5`,
      markedChunk(13),
      {
        'content-type': 'audio/wav',
      },
    );
    assert.equal(moved.status, 409);
    assert.equal(moved.json.error.code, 'track.offset_conflict');
    const noOffset = await h.request('PUT', `/v1/meetings/${id}/chunks/3?track=tab`, markedChunk(13), {
      'content-type': 'audio/wav',
    });
    assert.equal(noOffset.status, 400);
    assert.equal(noOffset.json.error.code, 'track.offset');

    // A track is deleted with its meeting, not alone.
    const alone = await h.request('DELETE', `/v1/meetings/${trackId}`);
    assert.equal(alone.status, 409);
    assert.equal(alone.json.error.code, 'meeting.is_track');
    // Deleting the meeting deletes its track.
    assert.equal((await h.request('DELETE', `/v1/meetings/${id}`)).status, 204);
    const left = await h.app.database.db
      .selectFrom('meetings')
      .select('id')
      .where('id', '=', view.tracks[0].meetingId)
      .execute();
    assert.deepEqual(left, []);
  });
});

void describe('two tracks with speech (L25)', () => {
  let h: Harness;
  before(async () => {
    h = await startHarness({ env: { VERBATIM_WINDOW_SECONDS: '20', VERBATIM_CLOSEOUT_GRACE_SECONDS: '1' } });
    h.spawnWorker();
  });
  after(async () => h?.close());

  void it('L25: the call’s voice leaking into the microphone is transcribed once, under the tab; each track is a speaker people can rename', async () => {
    // The user speaks first and third into the microphone; the call (the tab) second, and the
    // microphone hears the call through the speakers at 10 %.
    const conversation = conversationWav([
      'The quarterly budget meeting will discuss the marketing plan.',
      'We decided to hire two engineers for the new project.',
      'Alice will send the report to the finance team by Friday.',
    ]);
    const { sampleRate } = conversation;
    const { first: you, second: others, secondSpan: second } = conversationVoices(conversation);
    const micAudio = withBleed(you, others, 0.1);
    const size = 5 * sampleRate;
    const chunks = (x: Int16Array) => {
      const out: Buffer[] = [];
      for (let i = 0; i < x.length; i += size) out.push(encodeWav(x.subarray(i, i + size), sampleRate));
      return out;
    };
    const micChunks = chunks(micAudio);
    const tabChunks = chunks(others);
    const id = (await h.request('POST', '/v1/meetings', { source: 'live', title: 'echo' })).json.id as string;
    const puts: Array<[string, number, Buffer]> = [
      ...micChunks.map((c, i): [string, number, Buffer] => ['mic', i, c]),
      ...tabChunks.map((c, i): [string, number, Buffer] => ['tab', i, c]),
    ].sort((a, b) => a[1] - b[1] || (a[0] < b[0] ? 1 : -1));
    for (const [track, seq, body] of puts) {
      const q = track === 'tab' ? '?track=tab&trackOffsetMs=0' : '';
      const res = await h.request('PUT', `/v1/meetings/${id}/chunks/${seq}${q}`, body, {
        'content-type': 'audio/wav',
      });
      assert.equal(res.status, 201, res.text);
    }
    const ended = await h.request('POST', `/v1/meetings/${id}/end`, {
      chunks: micChunks.length,
      tracks: { tab: { chunks: tabChunks.length, offsetMs: 0 } },
    });
    assert.equal(ended.status, 202, ended.text);
    const meeting = await waitForMeeting(h, id);
    assert.equal(meeting.status, 'complete');

    // The microphone's own words did hear the call: the echo was there to be left out.
    const micEcho = await h.app.database.db
      .selectFrom('segments')
      .select(['text', 'start_ms', 'end_ms'])
      .where('meeting_id', '=', id)
      .where('start_ms', '<', second.endMs)
      .where('end_ms', '>', second.startMs)
      .execute();
    assert.ok(micEcho.length > 0, 'the microphone track transcribed the call’s echo');

    type Line = {
      startMs: number;
      endMs: number;
      text: string;
      speaker: { id: string; name: string } | null;
    };
    const read = async () =>
      (await h.request('GET', `/v1/meetings/${id}/transcript`)).json.segments as Line[];
    const lines = await read();
    const truth = (l: Line) => {
      const mid = (l.startMs + l.endMs) / 2;
      return mid >= second.startMs - 300 && mid <= second.endMs + 300 ? 'Others' : 'You';
    };
    assert.ok(lines.length >= 3, JSON.stringify(lines));
    for (const l of lines)
      assert.equal(l.speaker?.name, truth(l), `${l.text} at ${l.startMs}: ${JSON.stringify(lines)}`);
    for (const a of lines)
      for (const b of lines)
        if (a.speaker?.name !== b.speaker?.name)
          assert.ok(
            a.endMs <= b.startMs || b.endMs <= a.startMs,
            `${a.text} | ${b.text} overlap: transcribed twice`,
          );
    const text = lines.map((l) => l.text).join(' ');
    assert.match(text, /budget/);
    assert.match(text, /engineers/);
    assert.match(text, /report|finance/);

    // "Others" renamed in place: the transcript names the client.
    const others2 = lines.find((l) => l.speaker?.name === 'Others')!.speaker!;
    const renamed = await h.request('PATCH', `/v1/meetings/${id}/speakers/${others2.id}`, { name: 'Client' });
    assert.equal(renamed.status, 200, renamed.text);
    await waitFor('the rename to show', async () =>
      (await read()).some((l) => l.speaker?.name === 'Client') ? true : null,
    );
    const vtt = await h.request('GET', `/v1/meetings/${id}/transcript?format=vtt`);
    assert.match(vtt.text, /<v Client>/);
    assert.match(vtt.text, /<v You>/);
  });
});
