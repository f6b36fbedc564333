/**
 * (m) Attribution: who said it, against the truth, with real PocketSphinx on flite speech. The (i)
 * sentences are said alternately by two people ("Ann" the even ones, "Bob" the odd ones):
 *
 * - a stereo upload with `channels: "speakers"`, each channel hearing the other at 10 % (bleed);
 * - the same conversation mixed to mono with a bot provider's speaker timeline (the true turns,
 *   a little wider than the speech, as a platform reports them), applied to its meeting the way
 *   the bot import does (`applyBotSpeakers`);
 * - the same mono mix with no source at all, where every word must stay without a speaker;
 * - L25: a live meeting of two tracks, Ann at the microphone hearing Bob's voice from the speakers
 *   at 10 % (echo), Bob on the tab's track, next to a one-track live meeting of the mix.
 *
 * For each: words attributed to the right speaker among the words a source knows, and words given
 * a speaker no source knew (targets ≥ 98 % and 0). Cost: recognition time of the stereo meeting
 * (upload → transcript) next to the mono one of the same length, and of the two-track live meeting
 * next to the one-track one, in the same run (the bound for two tracks is 2.1 ×).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { buildAppApi, openApp, startAppWorker, type App } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { encodeWav } from '../src/domain/wav.ts';
import { createLogger } from '../src/log.ts';
import { applyBotSpeakers } from '../src/meetings/speakers.ts';
import { transcriptLines } from '../src/meetings/transcript-read.ts';
import { createTestDatabase } from '../test/support/db.ts';
import { sentenceAudio } from './live-captions.ts';

const RATE = 16_000;

export interface AttributionRun {
  label: string;
  words: number;
  /** Words a source knows the speaker of, and of those the ones given the right one. */
  known: number;
  right: number;
  /** Words given a speaker where no source knew one. */
  invented: number;
  transcribedS: number;
  /** The run its time is compared with, when not the mono upload. */
  baseline?: { label: string; seconds: number };
}

export interface Attribution {
  audioSeconds: number;
  runs: AttributionRun[];
}

function stereoWav(left: Int16Array, right: Int16Array): Buffer {
  const data = Buffer.alloc(left.length * 4);
  for (let i = 0; i < left.length; i++) {
    data.writeInt16LE(left[i]!, i * 4);
    data.writeInt16LE(right[i]!, i * 4 + 2);
  }
  const head = Buffer.alloc(44);
  head.write('RIFF', 0, 'ascii');
  head.writeUInt32LE(36 + data.length, 4);
  head.write('WAVEfmt ', 8, 'ascii');
  head.writeUInt32LE(16, 16);
  head.writeUInt16LE(1, 20);
  head.writeUInt16LE(2, 22);
  head.writeUInt32LE(RATE, 24);
  head.writeUInt32LE(RATE * 4, 28);
  head.writeUInt16LE(4, 32);
  head.writeUInt16LE(16, 34);
  head.write('data', 36, 'ascii');
  head.writeUInt32LE(data.length, 40);
  return Buffer.concat([head, data]);
}

const clip = (v: number) => Math.max(-32768, Math.min(32767, Math.round(v)));

export async function attribution(): Promise<Attribution> {
  const { samples, starts, ends } = sentenceAudio();
  const speakerOf = (i: number) => (i % 2 === 0 ? 'Ann' : 'Bob');
  const ann = new Int16Array(samples.length);
  const bob = new Int16Array(samples.length);
  starts.forEach((s, i) => {
    const from = Math.round(s * RATE);
    const to = Math.round(ends[i]! * RATE);
    (speakerOf(i) === 'Ann' ? ann : bob).set(samples.subarray(from, to), from);
  });
  const left = ann.map((v, i) => clip(v + 0.1 * bob[i]!));
  const right = bob.map((v, i) => clip(v + 0.1 * ann[i]!));
  const stereo = stereoWav(left, right);
  const mono = encodeWav(samples, RATE);
  /** The speaker whose sentence a stretch lies in (by its middle), or null in a pause. */
  const truth = (startMs: number, endMs: number) => {
    const mid = (startMs + endMs) / 2000;
    const i = starts.findIndex((s, k) => mid >= s - 0.3 && mid <= ends[k]! + 0.3);
    return i >= 0 ? speakerOf(i) : null;
  };

  const db = await createTestDatabase();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'verbatim-bench-attribution-'));
  const config = loadConfig({
    DATABASE_URL: db.appUrl,
    VERBATIM_MIGRATION_DATABASE_URL: db.url,
    VERBATIM_DATA_DIR: dataDir,
    VERBATIM_LOG_LEVEL: 'warn',
  });
  const app = await openApp(config, { logger: createLogger(config.logLevel, 'verbatim-bench') });
  const worker = await startAppWorker(app);
  const api = buildAppApi(app);
  await api.listen({ host: '127.0.0.1', port: 0 });
  const base = `http://127.0.0.1:${(api.server.address() as AddressInfo).port}`;
  try {
    const workspaceId = await app.workspaces.createWorkspace('bench');
    const { apiKey } = await app.workspaces.createApiKey(workspaceId, 'bench');
    const auth = { authorization: `Bearer ${apiKey}` };
    const upload = async (title: string, wav: Buffer, channels: boolean) => {
      const created = await fetch(`${base}/v1/meetings`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ source: 'upload', title, ...(channels ? { channels: 'speakers' } : {}) }),
      });
      const id = ((await created.json()) as { id: string }).id;
      const t = performance.now();
      const put = await fetch(`${base}/v1/meetings/${id}/recording`, {
        method: 'PUT',
        headers: { ...auth, 'content-type': 'audio/wav' },
        body: wav,
      });
      if (put.status !== 202) throw new Error(`upload: ${put.status} ${await put.text()}`);
      return { id, transcribedS: await transcribed(app, id, t) };
    };
    const measure = async (label: string, id: string, transcribedS: number, named: boolean) => {
      const lines = await transcriptLines(app.database.db, id);
      const run: AttributionRun = { label, words: 0, known: 0, right: 0, invented: 0, transcribedS };
      for (const l of lines) {
        const n = l.text.split(/\s+/).filter(Boolean).length;
        const who = named ? truth(l.startMs, l.endMs) : null;
        run.words += n;
        if (who !== null) {
          run.known += n;
          if (l.speaker?.name === who) run.right += n;
        } else if (l.speaker !== null) run.invented += n;
      }
      return run;
    };
    const runs: AttributionRun[] = [];
    /** The speaker keyed `annKey` is named Ann, every other Bob. */
    const nameAnnAndBob = async (meetingId: string, annKey: string) => {
      for (const sp of await app.database.db
        .selectFrom('speakers')
        .select(['id', 'key'])
        .where('meeting_id', '=', meetingId)
        .execute())
        await app.database.db
          .updateTable('speakers')
          .set({ display_name: sp.key === annKey ? 'Ann' : 'Bob' })
          .where('id', '=', sp.id)
          .execute();
    };

    const s = await upload('stereo', stereo, true);
    // Name the channels as the people they are (what a user does once, W4).
    await nameAnnAndBob(s.id, 'channel:1');
    runs.push(await measure('stereo upload, 10 % bleed', s.id, s.transcribedS, true));

    const m = await upload('bot timeline', mono, false);
    await app.database.db.transaction().execute((trx) =>
      applyBotSpeakers(
        app.deps,
        trx,
        m.id,
        {
          participants: [
            { id: '1', name: 'Ann', email: null },
            { id: '2', name: 'Bob', email: null },
          ],
          timeline: starts.map((st, i) => ({
            participant: { id: speakerOf(i) === 'Ann' ? '1' : '2', name: speakerOf(i), email: null },
            startS: st - 0.2,
            endS: ends[i]! + 0.2,
          })),
        },
        'bench',
      ),
    );
    runs.push(await measure('mono + bot speaker timeline', m.id, m.transcribedS, true));

    const none = await upload('no source', mono, false);
    runs.push(await measure('mono, no source', none.id, none.transcribedS, false));

    // L25: a call in a browser tab: Ann at the microphone, which hears Bob's voice from the
    // speakers at 10 %; Bob on the tab's track. Sent as the browser sends them (5 s WAV chunks,
    // both tracks at once), next to a one-track live meeting of the mono mix sent the same way.
    const live = async (title: string, tracks: Array<[string, Int16Array]> | Int16Array) => {
      const created = await fetch(`${base}/v1/meetings`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ source: 'live', title }),
      });
      const id = ((await created.json()) as { id: string }).id;
      const t = performance.now();
      const size = 5 * RATE;
      const counts: Record<string, number> = {};
      const puts: Array<Promise<void>> = [];
      for (const [track, audio] of Array.isArray(tracks) ? tracks : [['mic', tracks] as const]) {
        counts[track] = Math.ceil(audio.length / size);
        for (let seq = 0; seq < counts[track]; seq++) {
          const q = track === 'mic' ? '' : `?track=${track}&trackOffsetMs=0`;
          const body = encodeWav(audio.subarray(seq * size, (seq + 1) * size), RATE);
          puts.push(
            fetch(`${base}/v1/meetings/${id}/chunks/${seq}${q}`, {
              method: 'PUT',
              headers: { ...auth, 'content-type': 'audio/wav' },
              body,
            }).then(async (r) => {
              if (r.status !== 201) throw new Error(`chunk: ${r.status} ${await r.text()}`);
            }),
          );
        }
      }
      await Promise.all(puts);
      const others = Object.fromEntries(
        Object.entries(counts)
          .filter(([k]) => k !== 'mic')
          .map(([k, n]) => [k, { chunks: n, offsetMs: 0 }]),
      );
      const end = await fetch(`${base}/v1/meetings/${id}/end`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ chunks: counts.mic, tracks: others }),
      });
      if (end.status !== 202) throw new Error(`end: ${end.status} ${await end.text()}`);
      return { id, transcribedS: await transcribed(app, id, t) };
    };
    const one = await live('one track', samples);
    const oneRun = await measure('live, one track (the mix)', one.id, one.transcribedS, false);
    const micAudio = ann.map((v, i) => clip(v + 0.1 * bob[i]!));
    const two = await live('two tracks', [
      ['mic', micAudio],
      ['tab', bob],
    ]);
    await nameAnnAndBob(two.id, 'track:mic');
    const twoRun = await measure('live, two tracks, 10 % echo', two.id, two.transcribedS, true);
    twoRun.baseline = { label: 'the one-track live meeting', seconds: one.transcribedS };
    runs.push(oneRun, twoRun);
    return { audioSeconds: samples.length / RATE, runs };
  } finally {
    await api.close();
    await worker.stop(5_000);
    await app.close();
    await db.drop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

async function transcribed(app: App, id: string, t: number): Promise<number> {
  const deadline = performance.now() + 900_000;
  while (performance.now() < deadline) {
    const m = await app.database.db
      .selectFrom('meetings')
      .select(['status', 'transcript_completed_at'])
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
    if (m.status === 'failed') throw new Error('the meeting failed');
    if (m.transcript_completed_at) return (performance.now() - t) / 1000;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('the meeting was not transcribed in time');
}
