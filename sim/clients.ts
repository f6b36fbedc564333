/**
 * The simulation's clients (docs/simulation.md, "Clients"): each drives one scenario against the
 * HTTP API as a patient real client does, and keeps its history — every request, and every answer
 * each try of it got (V9, V11). What a client was told is one of the oracle's witnesses; nothing
 * here reads the service's database.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { markedWav, MARKS_PER_MEETING, toneSamples, wavOf } from './marks.ts';
import { accepted, deletedBy, type RequestKind, type RequestRecord } from './history.ts';
import type { Rng } from './rng.ts';

export const SCENARIOS = [
  'in-order',
  'reversed',
  'shuffled',
  'parallel',
  'duplicated',
  'drop-resend',
  'after-end',
  'late-no-count',
  'no-count',
  'upload',
  'bad-upload',
  'deleted',
  'resubmit',
  'regenerate',
  'batch-cancel',
  'bot',
  'two-track',
] as const;
export type Scenario = (typeof SCENARIOS)[number];

/**
 * The scenarios of a run: two bots and a canceled batch first, then every other scenario once (and
 * a second upload), before any is drawn at random, so a short run (a plant's) still exercises what
 * the floors (V10) and the plants count on, whatever the draw. Started in a seeded order.
 */
export function drawScenarios(n: number, rng: Rng): Scenario[] {
  const rest: Scenario[] = [...SCENARIOS.filter((s) => s !== 'bot' && s !== 'batch-cancel'), 'upload'];
  const first = (['bot', 'bot', 'batch-cancel', ...rng.shuffle(rest)] as Scenario[]).slice(0, n);
  const more = Array.from({ length: Math.max(0, n - first.length) }, () => rng.pick(SCENARIOS));
  return rng.shuffle([...first, ...more]);
}

export const UPLOAD_FORMATS: Array<{ type: string; lossy: boolean; args: string[] | null }> = [
  { type: 'audio/wav', lossy: false, args: null },
  { type: 'audio/x-wav', lossy: false, args: null },
  { type: 'audio/flac', lossy: false, args: ['-c:a', 'flac', '-f', 'flac'] },
  { type: 'audio/mpeg', lossy: true, args: ['-c:a', 'libmp3lame', '-b:a', '64k', '-f', 'mp3'] },
  { type: 'audio/ogg', lossy: true, args: ['-c:a', 'libopus', '-b:a', '32k', '-f', 'ogg'] },
  { type: 'audio/webm', lossy: true, args: ['-c:a', 'libopus', '-b:a', '32k', '-f', 'webm'] },
  {
    type: 'audio/mp4',
    lossy: true,
    args: ['-c:a', 'aac', '-b:a', '64k', '-movflags', 'frag_keyframe+empty_moov', '-f', 'mp4'],
  },
];

export interface ClientMeeting {
  /** The meeting's id; for a bot, its recording's id until the observer finds the meeting. */
  id: string;
  /** The number its audio is marked with (sim/marks.ts). */
  number: number;
  kind: 'live' | 'upload' | 'bot';
  scenario: Scenario;
  /** Its client's DELETE was answered 2xx (or 404 after a try that may have done it). */
  deleted: boolean;
  /** When the client sent its DELETE: requests after that are not promised. */
  deleteSentAt?: number;
  expectFailure: boolean;
  /** Samples the service accepted per mark (a live chunk's seq; an upload's stretch), counted once. */
  accepted: Map<number, number>;
  /**
   * Chunks sent whose answer never came (indeterminate, as Jepsen calls them): the service may
   * have stored them, so their words may be in the transcript, at most once.
   */
  unanswered: Map<number, number>;
  /** Its batch was (maybe) canceled: it may end failed, its words unwanted. */
  canceled: boolean;
  /** Regenerate tries sent (each may have been done, whatever its answer). */
  regenerations: number;
  /** An upload's Content-Type, and whether its format is lossy (read as tones, within a tolerance). */
  format?: string;
  lossy?: boolean;
  /** L25: a live meeting of two tracks; marks from TAB_MARK on are the tab's chunks. */
  tracks?: boolean;
}

/** L25: a two-track meeting's tab chunk `seq` carries mark TAB_MARK + seq. */
export const TAB_MARK = 8;

/** What the client sent, by the SHA-256 of its bytes: how the store watcher knows a file it sees. */
export interface SentAudio {
  number: number;
  marks: Map<number, number>;
  lossy: boolean;
}

const RETRYABLE = (status: number | null) =>
  status === null || status >= 500 || status === 408 || status === 429;

export class SimClient {
  readonly meetings: ClientMeeting[] = [];
  readonly history: RequestRecord[] = [];
  readonly sent = new Map<string, SentAudio>();
  /**
   * When the heal began. Until then a request is tried for as long as it takes, as the web app's
   * outbox does (it never gives up on a chunk); after it, for at most a minute more.
   */
  healedAt = Number.POSITIVE_INFINITY;
  constructor(
    private readonly ports: number[],
    private readonly apiKey: string,
    private readonly rng: Rng,
    /** Hands out the number a meeting's audio is marked with (shared with the bot world). */
    private readonly nextNumber: () => number,
  ) {}

  /**
   * One request, as a patient client sends it: on no answer, a 5xx, 408, 429 or a refusal that
   * names a Retry-After (L21's "too far ahead"), it waits (the Retry-After when there is one) and
   * tries again, on any api process, until an answer that settles it. Every try's answer goes into
   * the history. Null when it never got an answer that settles it.
   */
  async send(
    method: string,
    url: string,
    body?: Buffer | object,
    contentType?: string,
    how: {
      key?: string;
      onTry?: () => void;
      kind?: RequestKind;
      meetingId?: string;
      seq?: number;
      promised?: string | null;
    } = {},
  ): Promise<{ status: number; json: { [k: string]: unknown } | null } | null> {
    const record: RequestRecord = {
      kind: how.kind ?? 'poll',
      ...(how.meetingId ? { meetingId: how.meetingId } : {}),
      ...(how.seq !== undefined ? { seq: how.seq } : {}),
      promised: how.promised ?? null,
      sentAt: Date.now(),
      answers: [],
    };
    if (record.kind !== 'poll') this.history.push(record);
    const deadline = Date.now() + 240_000;
    while (Date.now() < Math.max(deadline, this.healedAt + 60_000)) {
      const port = this.rng.pick(this.ports);
      how.onTry?.();
      const at = Date.now();
      try {
        const res = await fetch(`http://127.0.0.1:${port}${url}`, {
          method,
          headers: {
            authorization: `Bearer ${this.apiKey}`,
            ...(body === undefined ? {} : { 'content-type': contentType ?? 'application/json' }),
            ...(how.key ? { 'idempotency-key': how.key } : {}),
          },
          body: body === undefined ? undefined : Buffer.isBuffer(body) ? body : JSON.stringify(body),
          signal: AbortSignal.timeout(4000),
        });
        const text = await res.text();
        let json: { [k: string]: unknown } | null = null;
        try {
          json = JSON.parse(text) as { [k: string]: unknown };
        } catch {
          json = null;
        }
        const retryAfter = Number(res.headers.get('retry-after') ?? 'NaN');
        const error = json?.error as { code?: unknown } | undefined;
        const code = typeof error?.code === 'string' ? error.code : undefined;
        record.answers.push({
          at,
          status: res.status,
          ...(code ? { code } : {}),
          ...(Number.isFinite(retryAfter) ? { retryAfterS: retryAfter } : {}),
        });
        if (RETRYABLE(res.status) || (res.status >= 400 && Number.isFinite(retryAfter))) {
          await sleep(Number.isFinite(retryAfter) ? retryAfter * 1000 : 100 + this.rng.int(400));
          continue;
        }
        return { status: res.status, json };
      } catch {
        record.answers.push({ at, status: null });
        await sleep(100 + this.rng.int(400));
      }
    }
    return null;
  }

  /** Creates a meeting as a careful client does: with a key, so a lost answer is safely retried. */
  private async create(
    index: number,
    scenario: Scenario,
    kind: 'live' | 'upload',
    batchId?: string,
  ): Promise<ClientMeeting | null> {
    const created = await this.send(
      'POST',
      '/v1/meetings',
      { source: kind, title: `sim ${index} ${scenario}`, ...(batchId ? { batchId } : {}) },
      undefined,
      { key: `sim-${index}-${scenario}-${this.rng.int(1e9)}`, kind: 'create' },
    );
    if (!created || (created.status !== 201 && created.status !== 200) || !created.json) return null;
    const m: ClientMeeting = {
      id: String(created.json.id),
      number: this.nextNumber(),
      kind,
      scenario,
      deleted: false,
      expectFailure: scenario === 'bad-upload',
      accepted: new Map(),
      unanswered: new Map(),
      canceled: false,
      regenerations: 0,
    };
    const last = this.history.findLast((r) => r.kind === 'create');
    if (last) last.meetingId = m.id;
    this.meetings.push(m);
    return m;
  }

  /**
   * Sends a recording in one of the accepted formats, drawn from the seed: stretches of marked
   * audio (marks 0, 1, …) in a lossless format, or of tones in a lossy one (sim/marks.ts). A bad
   * file is one of: a playlist, a WAV file's first bytes with junk after them, text sent as Ogg
   * (the playlist and the text are refused at the door, E5; the broken WAV fails its meeting).
   */
  private async upload(m: ClientMeeting, rng: Rng, bad: boolean): Promise<void> {
    let body: Buffer;
    let type: string;
    let stretches: Array<{ mark: number; samples: number }> = [];
    if (bad) {
      [body, type] = rng.pick<[Buffer, string]>([
        [Buffer.from(`#EXTM3U\n#EXT-X-VERSION:3\nfile:///etc/passwd\n`), 'audio/wav'],
        [
          Buffer.concat([Buffer.from('RIFF\x24\x00\x00\x00WAVE', 'latin1'), Buffer.alloc(4000, 7)]),
          'audio/wav',
        ],
        [Buffer.from('these are the minutes of the last meeting, not audio\n'.repeat(40)), 'audio/ogg'],
      ]);
    } else {
      const format = rng.pick(UPLOAD_FORMATS);
      type = format.type;
      m.lossy = format.lossy;
      stretches = Array.from({ length: 2 + rng.int(4) }, (_, mark) => ({
        mark,
        samples: 16_000 * (3 + rng.int(10)) + rng.int(16_000),
      }));
      const wav = format.lossy ? wavOf(toneSamples(stretches)) : markedWav(m.number, stretches);
      body = format.args ? await encode(wav, format.args) : wav;
      this.sent.set(sha256(body), {
        number: m.number,
        marks: new Map(stretches.map((s) => [s.mark, s.samples])),
        lossy: format.lossy,
      });
    }
    m.format = type;
    const res = await this.send('PUT', `/v1/meetings/${m.id}/recording`, body, type, {
      kind: 'upload',
      meetingId: m.id,
      promised: bad ? null : `an upload of ${type}`,
    });
    const record = this.history.findLast((r) => r.kind === 'upload' && r.meetingId === m.id);
    if (res && record && accepted(record)) {
      for (const s of stretches) m.accepted.set(s.mark, s.samples);
    } else if (!m.canceled) {
      // Refused at the door (or never answered): the client deletes what it made.
      await this.remove(m);
    }
  }

  /** Asks until the meeting is complete or failed (or the client gives up). */
  private async waitTerminal(m: ClientMeeting): Promise<void> {
    const deadline = Date.now() + 150_000;
    while (Date.now() < deadline) {
      const res = await this.send('GET', `/v1/meetings/${m.id}`);
      if (!res || res.status !== 200 || res.json?.status === 'complete' || res.json?.status === 'failed')
        return;
      await sleep(500);
    }
  }

  private async runBot(index: number, rng: Rng): Promise<void> {
    // A calendar event a bot records: it starts within seconds; the bot world plays the meeting.
    const start = Date.now() + 2_000 + rng.int(10_000);
    const code = [3, 4, 3]
      .map((n) => Array.from({ length: n }, () => 'abcdefghijkmnopqrstuvwxyz'[rng.int(25)]).join(''))
      .join('-');
    const res = await this.send(
      'POST',
      '/v1/calendar-events',
      {
        title: `sim ${index} bot`,
        meetingUrl: `https://meet.google.com/${code}`,
        start: new Date(start).toISOString(),
        // A minute long: a bot the faults keep from being made by the end is never scheduled (R5).
        end: new Date(start + 60_000).toISOString(),
        eventId: `sim-${index}`,
      },
      undefined,
      { kind: 'calendar' },
    );
    const recording = res?.json?.recording as { id?: unknown } | null | undefined;
    if (!res || (res.status !== 201 && res.status !== 200) || typeof recording?.id !== 'string') return;
    this.meetings.push({
      id: recording.id,
      number: -1, // the bot world numbers the audio its bot records
      kind: 'bot',
      scenario: 'bot',
      deleted: false,
      expectFailure: false,
      accepted: new Map(),
      unanswered: new Map(),
      canceled: false,
      regenerations: 0,
    });
    return;
  }

  private async runBatchCancel(index: number, rng: Rng): Promise<void> {
    // A batch of uploads, canceled at a random moment: each ends complete (done before the cancel) or
    // failed with its reason, and holds no audio either way.
    const batch = await this.send('POST', '/v1/batches', { title: `sim batch ${index}` }, undefined, {
      kind: 'batch',
    });
    if (!batch || batch.status !== 201 || typeof batch.json?.id !== 'string') return;
    const batchId = batch.json.id;
    const members: ClientMeeting[] = [];
    for (let k = 0; k < 1 + rng.int(3); k++) {
      const m = await this.create(index, 'batch-cancel', 'upload', batchId);
      if (m) members.push(m);
    }
    await Promise.all(members.map((m) => this.upload(m, rng.fork(), false)));
    await sleep(rng.int(4000));
    for (const m of members) m.canceled = true;
    await this.send('POST', `/v1/batches/${batchId}/cancel`, undefined, undefined, { kind: 'cancel' });
    return;
  }

  async run(scenario: Scenario, index: number, rng: Rng): Promise<void> {
    if (scenario === 'bot') return this.runBot(index, rng);
    if (scenario === 'batch-cancel') return this.runBatchCancel(index, rng);
    const kind = scenario === 'upload' || scenario === 'bad-upload' ? 'upload' : 'live';
    const m = await this.create(index, scenario, kind);
    if (!m) return;
    const base = `/v1/meetings/${m.id}`;

    if (kind === 'upload') {
      await this.upload(m, rng, scenario === 'bad-upload');
      return;
    }

    if (scenario === 'two-track') return this.runTwoTrack(m, rng);
    const n = 3 + rng.int(Math.min(10, MARKS_PER_MEETING - 3));
    const lengths = Array.from({ length: n }, () => 16_000 * (2 + rng.int(5)) + rng.int(4000));
    const chunks = lengths.map((samples, seq) => markedWav(m.number, [{ mark: seq, samples }]));
    for (const [seq, wav] of chunks.entries())
      this.sent.set(sha256(wav), { number: m.number, marks: new Map([[seq, lengths[seq]!]]), lossy: false });
    let ended = false;
    let endedWithCount = false;
    let highest = -1;
    const tried = new Set<number>();
    const put = async (seq: number) => {
      // Why the promise covers it (V9): every chunk the sim sends is below any count it declares.
      const why = ended
        ? endedWithCount
          ? 'a chunk sent after End (below its count)'
          : 'a chunk sent after End without a count'
        : tried.has(seq)
          ? 'a chunk sent again'
          : seq < highest
            ? 'a chunk sent out of order'
            : 'a chunk';
      tried.add(seq);
      highest = Math.max(highest, seq);
      const res = await this.send('PUT', `${base}/chunks/${seq}`, chunks[seq], 'audio/wav', {
        kind: 'chunk',
        meetingId: m.id,
        seq,
        promised: m.deleteSentAt === undefined ? why : null,
      });
      const tries = this.history.findLast((r) => r.kind === 'chunk' && r.meetingId === m.id && r.seq === seq);
      if (res && (res.status === 200 || res.status === 201)) {
        m.accepted.set(seq, lengths[seq]!);
        m.unanswered.delete(seq);
      } else if (
        !m.accepted.has(seq) &&
        (!res || tries?.answers.some((a) => a.status === null || a.status >= 500))
      )
        // A try without an answer may have stored it, whatever the last one said: indeterminate.
        m.unanswered.set(seq, lengths[seq]!);
    };
    const end = async (withCount: boolean) => {
      ended = true;
      endedWithCount = withCount;
      await this.send('POST', `${base}/end`, withCount ? { chunks: n } : {}, undefined, {
        kind: 'end',
        meetingId: m.id,
      });
    };
    const seqs = [...Array(n).keys()];
    const pace = () => sleep(rng.int(300));
    switch (scenario) {
      case 'in-order':
      case 'no-count':
      case 'deleted':
      case 'resubmit':
      case 'regenerate':
        for (const s of seqs) {
          await put(s);
          await pace();
        }
        if (scenario === 'deleted' && rng.chance(0.5)) {
          await this.remove(m);
          return;
        }
        await end(scenario !== 'no-count');
        if (scenario === 'deleted') await this.remove(m);
        if (scenario === 'resubmit') {
          // An operator resubmits while the meeting is still closing out (or already done: a 409).
          for (let k = 0; k < 1 + rng.int(2); k++) {
            await sleep(rng.int(3000));
            await this.send('POST', `${base}/resubmit`, undefined, undefined, {
              kind: 'resubmit',
              meetingId: m.id,
            });
          }
        }
        if (scenario === 'regenerate') {
          await this.waitTerminal(m);
          const onTry = () => void m.regenerations++;
          const asks = 1 + rng.int(2);
          await Promise.all(
            Array.from({ length: asks }, () =>
              this.send('POST', `${base}/minutes`, undefined, undefined, {
                onTry,
                kind: 'minutes',
                meetingId: m.id,
              }),
            ),
          );
        }
        return;
      case 'reversed':
        for (const s of [...seqs].reverse()) await put(s);
        await end(true);
        return;
      case 'shuffled':
        for (const s of rng.shuffle(seqs)) {
          await put(s);
          await pace();
        }
        await end(true);
        return;
      case 'parallel':
        await Promise.all(seqs.map((s) => put(s)));
        await end(true);
        return;
      case 'duplicated':
        for (const s of seqs) {
          await put(s);
          if (rng.chance(0.4)) await put(s);
        }
        await Promise.all([end(true), put(n - 1)]);
        return;
      case 'drop-resend': {
        const dropped = seqs.filter(() => rng.chance(0.3));
        for (const s of seqs) if (!dropped.includes(s)) await put(s);
        await end(true);
        await sleep(rng.int(3000));
        for (const s of dropped) await put(s);
        return;
      }
      case 'after-end':
        await end(true);
        for (const s of rng.shuffle(seqs)) await put(s);
        return;
      case 'late-no-count': {
        // End without a count, then the chunks held back: they arrive while it closes out, or after
        // it completed (L19: accepted whenever they arrive, spliced in).
        const held = seqs.filter((s) => s > 0 && rng.chance(0.4));
        if (held.length === 0) held.push(n - 1);
        for (const s of seqs) if (!held.includes(s)) await put(s);
        await end(false);
        await sleep(rng.int(4000));
        for (const s of rng.shuffle(held)) await put(s);
        return;
      }
      case 'upload':
      case 'bad-upload':
        return; // handled above
    }
  }

  /**
   * L25: a call in a browser tab: the microphone's chunks (marks 0…) and the tab's (marks TAB_MARK…),
   * both from the meeting's start, sent interleaved in a shuffled order; End declares both counts;
   * some of the tab's chunks come after End. Every sample of both is due once (V1), each under its
   * track's speaker (W8).
   */
  private async runTwoTrack(m: ClientMeeting, rng: Rng): Promise<void> {
    m.tracks = true;
    const base = `/v1/meetings/${m.id}`;
    const nMic = 2 + rng.int(TAB_MARK - 2);
    const nTab = 2 + rng.int(MARKS_PER_MEETING - TAB_MARK - 2);
    const lengthOf = () => 16_000 * (2 + rng.int(4)) + rng.int(4000);
    const chunks: Array<{ track: 'mic' | 'tab'; seq: number; mark: number; samples: number; wav: Buffer }> =
      [];
    for (let seq = 0; seq < nMic; seq++) {
      const samples = lengthOf();
      chunks.push({
        track: 'mic',
        seq,
        mark: seq,
        samples,
        wav: markedWav(m.number, [{ mark: seq, samples }]),
      });
    }
    for (let seq = 0; seq < nTab; seq++) {
      const samples = lengthOf();
      const mark = TAB_MARK + seq;
      chunks.push({ track: 'tab', seq, mark, samples, wav: markedWav(m.number, [{ mark, samples }]) });
    }
    for (const c of chunks)
      this.sent.set(sha256(c.wav), { number: m.number, marks: new Map([[c.mark, c.samples]]), lossy: false });
    let ended = false;
    const put = async (c: (typeof chunks)[number]) => {
      const path =
        c.track === 'mic' ? `${base}/chunks/${c.seq}` : `${base}/chunks/${c.seq}?track=tab&trackOffsetMs=0`;
      const res = await this.send('PUT', path, c.wav, 'audio/wav', {
        kind: 'chunk',
        meetingId: m.id,
        // The mark, not the seq: the two tracks' seqs repeat.
        seq: c.mark,
        promised:
          m.deleteSentAt === undefined
            ? ended
              ? `a ${c.track} chunk sent after End (below its count)`
              : `a ${c.track} chunk`
            : null,
      });
      const tries = this.history.findLast(
        (r) => r.kind === 'chunk' && r.meetingId === m.id && r.seq === c.mark,
      );
      if (res && (res.status === 200 || res.status === 201)) {
        m.accepted.set(c.mark, c.samples);
        m.unanswered.delete(c.mark);
      } else if (
        !m.accepted.has(c.mark) &&
        (!res || tries?.answers.some((a) => a.status === null || a.status >= 500))
      )
        m.unanswered.set(c.mark, c.samples);
    };
    const order = rng.shuffle(chunks);
    const late = order.filter((c) => c.track === 'tab' && rng.chance(0.3));
    for (const c of order) {
      if (late.includes(c)) continue;
      await put(c);
      await sleep(rng.int(200));
    }
    ended = true;
    await this.send(
      'POST',
      `${base}/end`,
      { chunks: nMic, tracks: { tab: { chunks: nTab, offsetMs: 0 } } },
      undefined,
      { kind: 'end', meetingId: m.id },
    );
    await sleep(rng.int(3000));
    for (const c of late) await put(c);
  }

  /**
   * Deletes a meeting. It counts as deleted when the DELETE was answered 2xx, or 404 after a try
   * that got no answer or a 5xx (that try may have deleted it, and its answer was lost); a 404 to
   * a DELETE that nothing before could have done is a lost meeting (V11), not a deletion.
   */
  private async remove(m: ClientMeeting): Promise<void> {
    m.deleteSentAt = Date.now();
    await this.send('DELETE', `/v1/meetings/${m.id}`, undefined, undefined, {
      kind: 'delete',
      meetingId: m.id,
    });
    const tries = this.history.findLast((r) => r.kind === 'delete' && r.meetingId === m.id)?.answers ?? [];
    m.deleted = deletedBy(tries);
  }
}

export function sha256(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** A WAV re-encoded by Debian's ffmpeg (the same one the service decodes with). */
function encode(wav: Buffer, args: string[]): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const ff = spawn('ffmpeg', [
      '-hide_banner',
      '-loglevel',
      'error',
      '-f',
      'wav',
      '-i',
      'pipe:0',
      ...args,
      'pipe:1',
    ]);
    const out: Buffer[] = [];
    let err = '';
    ff.stdout.on('data', (d: Buffer) => out.push(d));
    ff.stderr.on('data', (d: Buffer) => (err += d.toString()));
    ff.on('error', reject);
    ff.on('close', (code) =>
      code === 0 ? resolve(Buffer.concat(out)) : reject(new Error(`ffmpeg ${args.join(' ')}: ${err}`)),
    );
    ff.stdin.end(wav);
  });
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
