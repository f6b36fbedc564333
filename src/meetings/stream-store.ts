import { nameSpeakers, type SpeakerRef } from '../domain/speakers.ts';
import { formatSegments } from '../domain/readable-text.ts';
import { speakersOf } from './speaker-store.ts';
import { sql } from 'kysely';
import type { Db, MeetingRow, Tx } from '../db/schema.ts';
import { readAsTenant } from '../db/tenant.ts';
import type { TranscriptSegment } from '../ports.ts';

/**
 * L23: a meeting's changes as a stream its clients follow (GET /v1/meetings/{id}/events).
 *
 * Triggers (migration 0025) add a row to `meeting_stream` in every transaction that changes the
 * meeting's row, settles, supersedes or adds a window, or adds a draft (L22), and NOTIFY `verbatim_stream` with the
 * meeting's id. A row names what changed; what is sent is read from the tables when it is sent, so
 * an event always carries the current state of what it names, and two rows naming one window are
 * sent as one event.
 *
 * A row gets its position (`seq`) only after its transaction committed: `positionStream` numbers a
 * meeting's unpositioned rows under a per-meeting advisory lock, continuing from the last position.
 * Positions are therefore in the order rows became visible, and a client that has seen position N
 * (its `Last-Event-ID`) has seen every change up to N and gets every later one. They are gapless
 * when given; compaction (compactStreams, below) later removes rows a later row makes redundant.
 */
export const STREAM_CHANNEL = 'verbatim_stream';

/** The first key of the per-meeting positioning lock (two-int advisory locks: namespace, meeting). */
const STREAM_LOCK_NAMESPACE = 0x56425332;

/** Rows read per batch: a client far behind catches up in several batches. */
const BATCH = 500;

export interface StreamWindow {
  windowId: string;
  index: number;
  startMs: number;
  endMs: number;
  /** pending, transcribed, failed, missing, or superseded (replaced by a repair: drop its words). */
  status: string;
  /** W1: each with the speaker its own source gave it (track, channel, recogniser), else null. */
  segments: Array<TranscriptSegment & { speaker: SpeakerRef | null }>;
}

/** L22: a chunk's provisional words; drop it once a final window holds its middle. */
export interface StreamDraft {
  draftId: string;
  chunkSeq: number;
  startMs: number;
  endMs: number;
  text: string;
}

export type StreamEvent =
  | { id: number | null; event: 'window'; data: StreamWindow }
  | { id: number | null; event: 'draft'; data: StreamDraft }
  | { id: number | null; event: 'meeting'; data: unknown };

/**
 * F3: where each meeting's stream stands, for every meeting an api process follows, in one query
 * (the shared poll of src/api/stream-hub.ts): its last position, and whether rows wait for one. A
 * meeting that is gone is missing from the answer. Read as the system: positions only.
 */
export async function streamHeads(
  db: Db,
  meetingIds: string[],
): Promise<Map<string, { head: number; unpositioned: boolean }>> {
  const heads = new Map<string, { head: number; unpositioned: boolean }>();
  if (meetingIds.length === 0) return heads;
  const { rows } = await sql<{ id: string; head: number; unpositioned: boolean }>`
    select m.id::text as id,
           coalesce((select max(s.seq) from meeting_stream s where s.meeting_id = m.id), 0)::float8 as head,
           exists (select 1 from meeting_stream s where s.meeting_id = m.id and s.seq is null) as unpositioned
      from meetings m where m.id = any(${meetingIds}::uuid[])`.execute(db);
  for (const r of rows) heads.set(r.id, { head: r.head, unpositioned: r.unpositioned });
  return heads;
}

/** Numbers the meeting's committed rows that have no position yet. Cheap when there are none. */
export async function positionStream(db: Db, meetingId: string): Promise<void> {
  const waiting = await db
    .selectFrom('meeting_stream')
    .select('id')
    .where('meeting_id', '=', meetingId)
    .where('seq', 'is', null)
    .limit(1)
    .executeTakeFirst();
  if (!waiting) return;
  // The meeting's id as the database spells it, for one lock per meeting whatever a URL said.
  const id = meetingId.toLowerCase();
  for (let tries = 0; ; tries++) {
    // Read committed, whatever the server's default: the update starts after the lock is ours, so
    // it sees the positions the previous holder gave and continues from them.
    const positioned = await db
      .transaction()
      .setIsolationLevel('read committed')
      .execute(async (trx) => {
        // Not queued behind another stream positioning the same rows: try, and try again shortly,
        // so that many viewers of one meeting hold no pool connection waiting on each other.
        const lock = await sql<{ ok: boolean }>`
          select pg_try_advisory_xact_lock(${STREAM_LOCK_NAMESPACE}::int, hashtext(${id})) as ok`.execute(
          trx,
        );
        if (!lock.rows[0]?.ok) return false;
        await sql`
          with top as (
            select coalesce(max(seq), 0) as seq from meeting_stream where meeting_id = ${id}::uuid
          ), fresh as (
            select id, row_number() over (order by id) as n
              from meeting_stream
             where meeting_id = ${id}::uuid and seq is null
          )
          update meeting_stream s set seq = top.seq + fresh.n
            from top, fresh
           where s.id = fresh.id and s.seq is null`.execute(trx);
        return true;
      });
    if (positioned || tries >= 40) return;
    await new Promise((r) => setTimeout(r, 25));
  }
}

/**
 * The events after position `after`, at most one batch, as the meeting's tenant, from one snapshot.
 * Windows come in the order of their last change; a meeting snapshot closes every batch that
 * changed anything, so counts and status always match the windows just sent. `last` is the
 * position the client has after this batch; `more` says another batch is waiting.
 */
export async function readStream(
  db: Db,
  workspaceId: string,
  meetingId: string,
  after: number,
  meetingView: (trx: Tx, m: MeetingRow) => Promise<unknown>,
  getMeeting: (trx: Tx) => Promise<MeetingRow>,
  first = false,
): Promise<{ events: StreamEvent[]; last: number; more: boolean }> {
  await positionStream(db, meetingId);
  return readAsTenant(db, workspaceId, async (trx) => {
    const meeting = await getMeeting(trx);
    const rows = await trx
      .selectFrom('meeting_stream')
      .select(['seq', 'kind', 'ref'])
      .where('meeting_id', '=', meetingId)
      .where('seq', '>', after)
      .orderBy('seq')
      .limit(BATCH)
      .execute();
    if (rows.length === 0) {
      // A stream's first batch always says where the meeting stands, even with nothing new.
      const events: StreamEvent[] = first
        ? [{ id: null, event: 'meeting', data: await meetingView(trx, meeting) }]
        : [];
      return { events, last: after, more: false };
    }
    const last = rows[rows.length - 1]!.seq!;
    // Each window or draft once, at the position of its last change.
    const lastOf = new Map<string, { seq: number; kind: 'window' | 'draft' }>();
    for (const r of rows) if (r.kind !== 'meeting' && r.ref) lastOf.set(r.ref, { seq: r.seq!, kind: r.kind });
    const ids = (kind: string) => [...lastOf].filter(([, v]) => v.kind === kind).map(([id]) => id);
    const windows = await windowsWithSegments(trx, ids('window'));
    const drafts = await liveDrafts(trx, meetingId, ids('draft'));
    const events: StreamEvent[] = [...lastOf.entries()]
      .sort((a, b) => a[1].seq - b[1].seq)
      .flatMap(([id, { seq, kind }]): StreamEvent[] => {
        if (kind === 'window') {
          const w = windows.get(id);
          return w ? [{ id: seq, event: 'window', data: w }] : [];
        }
        const d = drafts.get(id);
        return d ? [{ id: seq, event: 'draft', data: d }] : [];
      });
    const lastSent = events.length > 0 ? events[events.length - 1]!.id! : 0;
    events.push({
      id: last > lastSent ? last : null,
      event: 'meeting',
      data: await meetingView(trx, meeting),
    });
    return { events, last, more: rows.length === BATCH };
  });
}

async function windowsWithSegments(trx: Tx, ids: string[]): Promise<Map<string, StreamWindow>> {
  const out = new Map<string, StreamWindow>();
  if (ids.length === 0) return out;
  const windows = await trx
    .selectFrom('windows')
    .select(['id', 'index', 'start_ms', 'end_ms', 'status'])
    .where('id', 'in', ids)
    .execute();
  for (const w of windows) {
    out.set(w.id, {
      windowId: w.id,
      index: w.index,
      startMs: w.start_ms,
      endMs: w.end_ms,
      status: w.status,
      segments: [],
    });
  }
  const segments = await trx
    .selectFrom('segments')
    .select(['window_id', 'meeting_id', 'start_ms', 'end_ms', 'text', 'speaker_key'])
    .where('window_id', 'in', ids)
    .orderBy('start_ms')
    .orderBy('seq')
    .execute();
  // W1: finals name the speaker their own source gave them; a timeline's turns are applied by the
  // transcript (a live meeting has none).
  const named = new Map<string, SpeakerRef | null>();
  const meetingIds = [...new Set(segments.flatMap((s) => (s.speaker_key ? [s.meeting_id] : [])))];
  for (const meetingId of meetingIds) {
    const speakers = await speakersOf(trx, meetingId);
    const keys = [...new Set(segments.flatMap((s) => (s.speaker_key ? [s.speaker_key] : [])))];
    const lines = nameSpeakers(
      keys.map((k) => ({ startMs: 0, endMs: 0, text: '', speakerKey: k, attribution: 'source' as const })),
      speakers,
    );
    keys.forEach((k, i) => named.set(`${meetingId} ${k}`, lines[i]!.speaker));
  }
  for (const s of segments) {
    const w = out.get(s.window_id);
    if (w && w.status !== 'superseded')
      w.segments.push({
        startMs: s.start_ms,
        endMs: s.end_ms,
        text: s.text,
        speaker: s.speaker_key ? (named.get(`${s.meeting_id} ${s.speaker_key}`) ?? null) : null,
      });
  }
  // E2: the words read as sentences, as the transcript reads them (a window's own context).
  for (const w of out.values()) w.segments = formatSegments(w.segments);
  return out;
}

/** The drafts still worth showing: not dropped, and not under a window's final words already. */
async function liveDrafts(trx: Tx, meetingId: string, ids: string[]): Promise<Map<string, StreamDraft>> {
  const out = new Map<string, StreamDraft>();
  if (ids.length === 0) return out;
  const rows = await trx
    .selectFrom('drafts as d')
    .select(['d.id', 'd.chunk_seq', 'd.start_ms', 'd.end_ms', 'd.text'])
    .where('d.id', 'in', ids)
    .where('d.meeting_id', '=', meetingId)
    .where((eb) =>
      eb.not(
        eb.exists(
          eb
            .selectFrom('windows as w')
            .select('w.id')
            .whereRef('w.meeting_id', '=', 'd.meeting_id')
            .where('w.status', '=', 'transcribed')
            .where(
              sql<boolean>`(d.start_ms + d.end_ms) / 2 >= w.start_ms and (d.start_ms + d.end_ms) / 2 < w.end_ms`,
            ),
        ),
      ),
    )
    .execute();
  for (const d of rows) {
    out.set(d.id, {
      draftId: d.id,
      chunkSeq: d.chunk_seq,
      startMs: Number(d.start_ms),
      endMs: Number(d.end_ms),
      text: d.text,
    });
  }
  return out;
}

/**
 * L23: a meeting's stream keeps, of the rows naming one window, one draft or the meeting itself,
 * only the last. Every event is read from the tables when it is sent, at the position of its
 * subject's last change, so a client resuming from any position gets the same events either way.
 * A row of a draft that is gone (a window's finals replaced it) is sent as nothing and goes too.
 * A meeting's last row always stays: the next change is positioned after it. Positioned rows
 * only, a batch at a time; the rest waits for the next run.
 */
export async function compactStreams(db: Db, limit = 5000): Promise<number> {
  const res = await sql`
    delete from meeting_stream s
     where s.id in (
       select c.id from meeting_stream c
        where c.seq is not null
          and (
            (c.kind = 'meeting' and exists (
               select 1 from meeting_stream t
                where t.meeting_id = c.meeting_id and t.kind = 'meeting' and t.ref is null
                  and t.seq > c.seq))
            or (c.ref is not null and exists (
               select 1 from meeting_stream t
                where t.meeting_id = c.meeting_id and t.kind = c.kind and t.ref = c.ref
                  and t.seq > c.seq))
            or (c.kind = 'draft'
                and not exists (select 1 from drafts d where d.id = c.ref)
                and exists (
                  select 1 from meeting_stream t where t.meeting_id = c.meeting_id and t.seq > c.seq)))
        limit ${limit})`.execute(db);
  return Number(res.numAffectedRows ?? 0);
}
