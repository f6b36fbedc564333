import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { applyCorrections, CORRECTION_DRIFT_MS, type Correction } from '../src/domain/corrections.ts';
import { markedChunk, startChunkRecognizer, type ChunkRecognizer } from './support/chunk-recognizer.ts';
import { startHarness, waitFor, waitForMeeting, type Harness } from './support/harness.ts';

const at = (s: number) => new Date(Date.UTC(2026, 11, 6, 12, 0, s));
const line = (startMs: number, endMs: number, text: string) => ({ startMs, endMs, text });
const fix = (
  id: string,
  startMs: number,
  endMs: number,
  originalText: string,
  text: string,
  s = 0,
): Correction => ({
  id,
  startMs,
  endMs,
  originalText,
  text,
  createdAt: at(s),
});

void describe('E3: corrections applied when a transcript is read', () => {
  void it('E3: a correction follows its words when a repair moves the line, and only to the nearest line with those words', () => {
    const lines = [line(0, 2000, 'yes'), line(6200, 8000, 'the budget is fine'), line(30_000, 31_000, 'yes')];
    const out = applyCorrections(lines, [
      fix('a', 5000, 7000, 'the budget is fine', 'The budget is fine.'),
      fix('b', 29_500, 30_500, 'yes', 'Yes, agreed.'),
    ]);
    assert.deepEqual(
      out.map((l) => [l.text, l.correctionId, l.review]),
      [
        ['yes', null, null],
        ['The budget is fine.', 'a', null],
        ['Yes, agreed.', 'b', null],
      ],
    );
    assert.equal(out[1]!.rawText, 'the budget is fine', 'the recogniser’s words go beside the correction');
  });

  void it('E3: a correction whose words a repair changed is shown as needing a look, on the line nearest to it, never dropped', () => {
    const lines = [line(0, 2000, 'so we ship'), line(2600, 5000, 'on monday morning')];
    const out = applyCorrections(lines, [fix('a', 2500, 4000, 'on monday', 'On Monday.')]);
    assert.equal(out[1]!.text, 'on monday morning', 'the recogniser’s new words are read');
    assert.deepEqual(out[1]!.review, { correctionId: 'a', text: 'On Monday.' });
    assert.equal(out[0]!.review, null);
    // Far from every line: still shown, on the nearest one.
    const far = applyCorrections(lines, [
      fix('b', 5000 + CORRECTION_DRIFT_MS * 3, 5000 + CORRECTION_DRIFT_MS * 3 + 900, 'gone', 'Gone.'),
    ]);
    assert.deepEqual(far[1]!.review, { correctionId: 'b', text: 'Gone.' });
  });

  void it('E3: two lines with the same words side by side each keep their own correction, whichever was made first', () => {
    const lines = [line(0, 1000, 'okay'), line(1000, 2000, 'okay'), line(2000, 3000, 'so')];
    const second = applyCorrections(lines, [fix('b', 1000, 2000, 'okay', 'Okay, agreed.')]);
    assert.deepEqual(
      second.map((l) => l.correctionId),
      [null, 'b', null],
    );
    const both = applyCorrections(lines, [
      fix('b', 1000, 2000, 'okay', 'Okay, agreed.', 1),
      fix('a', 0, 1000, 'okay', 'Okay.', 2),
    ]);
    assert.deepEqual(
      both.map((l) => l.text),
      ['Okay.', 'Okay, agreed.', 'so'],
    );
    // Both moved by a repair: still each its own, by the closest span.
    const moved = [line(400, 1400, 'okay'), line(1400, 2400, 'okay')];
    assert.deepEqual(
      applyCorrections(moved, [
        fix('b', 1000, 2000, 'okay', 'B.', 1),
        fix('a', 0, 1000, 'okay', 'A.', 2),
      ]).map((l) => l.text),
      ['A.', 'B.'],
    );
  });

  void it('E3: the newest correction of a line wins; an older one saying the same thing asks for nothing', () => {
    const lines = [line(0, 2000, 'acme corp it is')];
    const out = applyCorrections(lines, [
      fix('old', 0, 2000, 'acme corp it is', 'Acme Corp it is', 1),
      fix('new', 0, 2000, 'acme corp it is', 'Acme Corp, it is.', 2),
    ]);
    assert.equal(out[0]!.text, 'Acme Corp, it is.');
    assert.equal(out[0]!.correctionId, 'new');
  });
});

interface Line {
  startMs: number;
  endMs: number;
  text: string;
  rawText: string;
  correctionId: string | null;
  review: { correctionId: string; text: string } | null;
}

const CHUNKS = 12;
const LATE = 5;
const lengthOf = (seq: number) => 64_000 + ((seq * 7_919) % 32_000);

void describe('E3: corrections through the API', () => {
  let h: Harness;
  let recognizer: ChunkRecognizer;
  before(async () => {
    recognizer = await startChunkRecognizer();
    h = await startHarness({
      env: {
        VERBATIM_ASR: 'whisper',
        VERBATIM_WHISPER_URL: recognizer.url,
        VERBATIM_WINDOW_SECONDS: '20',
        VERBATIM_BOUNDARY_SEARCH_SECONDS: '2',
        VERBATIM_CHUNK_SECONDS: '5',
        VERBATIM_GAP_PATIENCE_SECONDS: '0',
      },
    });
    h.spawnWorker();
  });
  after(async () => {
    await h?.close();
    await recognizer?.close();
  });

  const lines = async (id: string): Promise<Line[]> => {
    const res = await h.request('GET', `/v1/meetings/${id}/transcript`);
    assert.equal(res.status, 200, res.text);
    return res.json.segments as Line[];
  };
  const put = (id: string, seq: number) =>
    h.request('PUT', `/v1/meetings/${id}/chunks/${seq}`, markedChunk(seq, lengthOf(seq)), {
      'content-type': 'audio/wav',
    });

  void it('E3: every line corrected, then a late chunk repaired in: each correction is kept where its words came back and shown as needing a look where they did not; none is lost', async () => {
    const created = await h.request('POST', '/v1/meetings', { source: 'live', title: 'Budget review' });
    const id = created.json.id as string;
    for (let seq = 0; seq < CHUNKS; seq++) if (seq !== LATE) assert.equal((await put(id, seq)).status, 201);
    assert.equal((await h.request('POST', `/v1/meetings/${id}/end`, { chunks: CHUNKS })).status, 202);
    const done = await waitForMeeting(h, id);
    assert.deepEqual(done.missingChunks, [LATE]);

    const before = await lines(id);
    assert.ok(before.length >= CHUNKS - 1, `a line per chunk at least: ${before.length}`);
    const corrected = new Map<string, string>();
    for (const l of before) {
      const text = `Fixed ${l.rawText}.`;
      const res = await h.request('POST', `/v1/meetings/${id}/corrections`, {
        startMs: l.startMs,
        rawText: l.rawText,
        text,
      });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.json.text, text);
      corrected.set(res.json.correctionId as string, text);
    }
    const revised = (await h.request('GET', `/v1/meetings/${id}`)).json;
    assert.equal(revised.revision, before.length, 'each correction is a transcript revision');
    const shown = await lines(id);
    assert.deepEqual(
      shown.map((l) => l.text),
      before.map((l) => `Fixed ${l.rawText}.`),
    );

    // The audit trail and the event, as for any revision.
    const db = h.app.database.db;
    const events = await db
      .selectFrom('outbox')
      .select('payload')
      .where('event_type', '=', 'meeting.transcript_revised')
      .where('subject_id', '=', id)
      .execute();
    // The outbox holds a row per consumer (search, minutes, webhooks): one revision each.
    const revisions = new Set(events.map((e) => (e.payload as { correctionId?: string }).correctionId));
    assert.deepEqual(
      [...revisions].sort(),
      [...corrected.keys()].sort(),
      'meeting.transcript_revised per correction',
    );
    const trail = await h.request('GET', `/v1/audit?limit=200`);
    assert.equal(trail.status, 200, trail.text);
    const audited = (trail.json.events as Array<{ action: string; subject: { id: string } | null }>).filter(
      (e) => e.action === 'transcript.corrected' && e.subject?.id === id,
    );
    assert.equal(audited.length, before.length, 'each correction in the audit trail');

    // Exports, the meetings list's preview and search read the correction.
    const txt = await h.request('GET', `/v1/meetings/${id}/transcript?format=txt`);
    assert.match(txt.text, /Fixed c0x\d+\./);
    const list = await h.request('GET', '/v1/meetings?limit=50');
    assert.match(
      (list.json.previews as Record<string, { text: string }>)[id]!.text,
      /^Fixed c0x\d+\. Fixed c1x/,
    );
    await waitFor('search to find a corrected word', async () => {
      const res = await h.request('GET', `/v1/search?q=fixed`);
      const results = (res.json?.results ?? []) as Array<{ meeting: { id: string } }>;
      return res.status === 200 && results.some((r) => r.meeting.id === id) ? res : null;
    });

    // The late chunk: the window over its stretch is replaced, and every line after it moves.
    assert.equal((await put(id, LATE)).status, 201);
    await waitFor('the repair to be published', async () => {
      const m = (await h.request('GET', `/v1/meetings/${id}`)).json;
      return m.revision > revised.revision && m.lateAudio.lateChunks === 0 && !m.lateAudio.repairing
        ? m
        : null;
    });
    const superseded = await db
      .selectFrom('windows')
      .select('id')
      .where('meeting_id', '=', id)
      .where('status', '=', 'superseded')
      .execute();
    assert.ok(superseded.length > 0, 'the repair replaced windows (and the lines in them)');

    const after = await lines(id);
    assert.ok(
      after.some((l) => new RegExp(`^c${LATE}x`).test(l.rawText)),
      'the late chunk’s words are in',
    );
    const kept = after.filter((l) => l.correctionId !== null);
    const looks = after.filter((l) => l.review !== null);
    for (const l of kept) assert.equal(l.text, corrected.get(l.correctionId!), 'kept as written');
    for (const l of kept) assert.equal(l.text, `Fixed ${l.rawText}.`, 'only on a line with its own words');
    const accounted = new Set([
      ...kept.map((l) => l.correctionId!),
      ...looks.map((l) => l.review!.correctionId),
    ]);
    assert.deepEqual(
      [...accounted].sort(),
      [...corrected.keys()].sort(),
      'every correction applied or asking for a look',
    );
    // A line whose words are unchanged kept its correction across the repair.
    const moved = after.filter(
      (l) =>
        l.correctionId !== null && !before.some((b) => b.startMs === l.startMs && b.rawText === l.rawText),
    );
    assert.ok(moved.length > 0, 'at least one corrected line was re-cut or moved by the repair and kept it');

    // A line read before the repair whose words changed: 409, nothing stored.
    // (This repair re-cuts only the late chunk's stretch, so no corrected line's words change
    // here; a look asked for is proven by the unit tests above.)
    const gone = before.find((b) => !after.some((a) => a.startMs === b.startMs && a.rawText === b.rawText));
    assert.ok(gone, 'a line read before the repair is gone');
    {
      const stale = await h.request('POST', `/v1/meetings/${id}/corrections`, {
        startMs: gone.startMs,
        rawText: gone.rawText,
        text: 'Too late.',
      });
      assert.equal(stale.status, 409, stale.text);
      assert.equal(stale.json.error.code, 'transcript.changed');
    }

    // Corrected again: the line holds the newest; deleting it gives back the recogniser's words.
    const twice = kept[1]!;
    const again = await h.request('POST', `/v1/meetings/${id}/corrections`, {
      startMs: twice.startMs,
      rawText: twice.rawText,
      text: 'Said again.',
    });
    assert.equal(again.status, 200, again.text);
    const now = (await lines(id)).find((l) => l.startMs === twice.startMs)!;
    assert.equal(now.text, 'Said again.');
    assert.equal(now.review, null);
    const held = await db
      .selectFrom('transcript_corrections')
      .select('id')
      .where('meeting_id', '=', id)
      .execute();
    assert.equal(
      held.length,
      before.length,
      'a line holds one correction: the newest replaced the one it had',
    );
    const one = kept[0]!;
    assert.equal(
      (await h.request('DELETE', `/v1/meetings/${id}/corrections/${one.correctionId}`)).status,
      204,
    );
    const back = (await lines(id)).find((l) => l.startMs === one.startMs)!;
    assert.equal(back.correctionId, null);
    assert.equal(back.text, back.rawText, 'the recogniser’s words again');
    assert.equal(
      (await h.request('DELETE', `/v1/meetings/${id}/corrections/${one.correctionId}`)).status,
      404,
    );
  });

  void it('E3: bad corrections get a 400 naming what is wrong and store nothing; a meeting is renamed', async () => {
    const created = await h.request('POST', '/v1/meetings', { source: 'live', title: 'notes.wav' });
    const id = created.json.id as string;
    for (const [body, code] of [
      [{ startMs: -1, rawText: 'x', text: 'y' }, 'correction.start_ms'],
      [{ startMs: 0, text: 'y' }, 'correction.raw_text'],
      [{ startMs: 0, rawText: 'x', text: '   ' }, 'correction.text'],
      [{ startMs: 0, rawText: 'x', text: 'y'.repeat(10_001) }, 'correction.text'],
    ] as const) {
      const res = await h.request('POST', `/v1/meetings/${id}/corrections`, body);
      assert.equal(res.status, 400, res.text);
      assert.equal(res.json.error.code, code);
    }
    const missing = await h.request('POST', `/v1/meetings/${id}/corrections`, {
      startMs: 0,
      rawText: 'x',
      text: 'y',
    });
    assert.equal(missing.status, 409);
    assert.equal(
      missing.json.error.code,
      'transcript.not_final',
      'corrected once the transcript is complete',
    );
    const rows = await h.app.database.db
      .selectFrom('transcript_corrections')
      .select('id')
      .where('meeting_id', '=', id)
      .execute();
    assert.deepEqual(rows, []);

    const empty = await h.request('PATCH', `/v1/meetings/${id}`, { title: '  ' });
    assert.equal(empty.status, 400);
    assert.equal(empty.json.error.code, 'meeting.title');
    const renamed = await h.request('PATCH', `/v1/meetings/${id}`, { title: '  Weekly   sync ' });
    assert.equal(renamed.status, 200, renamed.text);
    assert.equal(renamed.json.title, 'Weekly sync');
    const found = await h.request('GET', `/v1/meetings?q=weekly`);
    const listed = found.json.meetings as Array<{ id: string }>;
    assert.ok(listed.some((m) => m.id === id));
  });
});
