import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import type { Executor, MeetingRow, Tx } from '../db/schema.ts';
import {
  EventType,
  JobKind,
  JobStatus,
  MeetingSource,
  MinutesStatus,
  WindowStatus,
  WindowTransitions,
} from '../domain/status.ts';
import {
  decodeEnergy,
  mapPosition,
  planRepair,
  repairRegions,
  type RegionWindow,
  type RepairInput,
  type RepairPlan,
  type Resize,
  type Span,
} from '../domain/timeline.ts';
import { emitEvent } from '../events/outbox.ts';
import { recordAudit } from '../jobs/audit.ts';
import type { JobContext, JobDefinition } from '../jobs/job-definition.ts';
import type { TranscriptSegment } from '../ports.ts';
import { compensate } from '../storage/objects.ts';
import { deleteMeetingAudio } from './audio-lifecycle.ts';
import type { MeetingDeps } from './deps.ts';
import { advanceTimeline } from './live.ts';
import { applyDecoded, basisOf, decodePieces, readPieces, stagedOf, type DecodedPiece } from './live-webm.ts';
import {
  closedTimeline,
  cutOptions,
  loadStretch,
  nextWindowIndex,
  samplesToMs,
  type ChunkSource,
} from './timeline-rows.ts';
import { segmentRows } from './transcription.ts';
import { stretchAudio } from './window-audio.ts';

/** Arrived chunks placed by one repair run; the rest wait for the next run of the same job. */
const BATCH = 50;

/**
 * L19: the meeting's repair job. It places chunks that arrived for stretches the timeline already
 * went past, and cuts new audio after a closed timeline: it plans from a snapshot (src/domain/
 * timeline.ts decides), recognises the new windows with no lock held, then in one fenced
 * transaction checks that the snapshot still holds, moves everything after each resized stretch,
 * replaces the old windows (their active jobs superseded, J13) and commits the new ones with their
 * segments. A published transcript gets a new revision, `meeting.transcript_revised` and minutes
 * rewritten. One job per meeting; it runs again while work remains. See docs/live-meetings.md.
 */
export function repairTimelineJob(deps: MeetingDeps): JobDefinition {
  return {
    kind: JobKind.repairTimeline,
    run: async (ctx) => {
      const meetingId = String(ctx.job.payload.meetingId);
      // After the close-out, new audio is placed as it comes; WebM pieces a request could not
      // decode in time are decoded and placed here first.
      await advanceTimeline(deps, meetingId, ctx.actor, {
        final: false,
        onlyClosed: true,
        untilDone: true,
        signal: ctx.signal,
      });
      const snapshot = await loadRepair(deps, deps.db, meetingId, null);
      if (!snapshot || snapshot.empty) {
        await settle(deps, ctx, meetingId, null);
        return;
      }
      const decoded = await decodeResized(deps, snapshot);
      try {
        const prepared = await prepare(deps, snapshot, decoded);
        const recognised = new Map<number, TranscriptSegment[]>();
        for (const [i, w] of prepared.plan.create.entries()) {
          if (w.kind !== 'transcribe') continue;
          let wav: Buffer;
          try {
            wav = await stretchAudio(deps, prepared.sources, w.start, w.end);
          } catch (err) {
            // The close-out deleted the meeting's audio after this plan was made: the plan's
            // neighbours are gone, so plan again, as a splice around the late audio (kept).
            if (!snapshot.meeting.audio_deleted_at && (await audioDeleted(deps, meetingId))) {
              await ctx.requeue(0, 'the meeting audio was deleted while repairing; planning again');
              await compensate(deps, stagedOf(decoded), err);
              return;
            }
            throw err;
          }
          const language = snapshot.meeting.language;
          recognised.set(i, await deps.transcriber.transcribe({ wav, language, signal: ctx.signal }));
        }
        await deps.checkpoints.hit('repair-timeline.before-commit', { meetingId });
        const outcome = await settle(deps, ctx, meetingId, (trx) =>
          commitRepair(deps, trx, ctx.actor, snapshot, decoded, prepared, recognised),
        );
        if (outcome === 'replanned') await compensate(deps, stagedOf(decoded), new Replan());
      } catch (err) {
        await compensate(deps, stagedOf(decoded), err);
        throw err;
      }
    },
    onTerminalFailure: async (trx, job, error) => {
      const meetingId = String(job.payload.meetingId);
      const meeting = await deps.meetings.lock(trx, meetingId);
      await trx
        .updateTable('meetings')
        .set({
          repair_failure_code: error.code,
          repair_failure_message: error.message,
          updated_at: sql<Date>`now()`,
        })
        .where('id', '=', meetingId)
        .execute();
      await recordAudit(trx, {
        workspaceId: meeting.workspace_id,
        subjectType: 'meeting',
        subjectId: meetingId,
        from: meeting.status,
        to: meeting.status,
        actor: 'worker',
        reason: `late audio could not be added: ${error.code}: ${error.message}`,
      });
      deps.log.error({ meetingId, code: error.code }, 'a repair of late audio failed for good');
      return null;
    },
  };
}

class RunAgain extends Error {}
/** The snapshot a plan was made from no longer holds: plan again (this spends no retry). */
class Replan extends Error {}

/**
 * Ends a run: commits the repair (if any) with the job's completion, or, when more work arrived
 * meanwhile (checked under the meeting lock, as ensureRepairJob checks for this job), with a
 * requeue so the same job runs again. After the commit, late audio of an ended meeting is deleted.
 */
async function settle(
  deps: MeetingDeps,
  ctx: JobContext,
  meetingId: string,
  commit: ((trx: Tx) => Promise<{ audioDeleted: boolean }>) | null,
): Promise<'done' | 'replanned'> {
  let audioDeleted = false;
  const body = async (trx: Tx): Promise<boolean> => {
    if (commit) audioDeleted = (await commit(trx)).audioDeleted;
    else await trx.selectFrom('meetings').select('id').where('id', '=', meetingId).forNoKeyUpdate().execute();
    return hasRepairWork(trx, meetingId);
  };
  try {
    try {
      await ctx.complete(async (trx) => {
        if (await body(trx)) throw new RunAgain();
      });
    } catch (err) {
      if (!(err instanceof RunAgain)) throw err;
      await ctx.requeue(0, 'more late audio to place', async (trx) => {
        await body(trx);
      });
    }
  } catch (err) {
    if (!(err instanceof Replan)) throw err;
    await ctx.requeue(0, 'the timeline changed while repairing; planning again');
    return 'replanned';
  }
  if (audioDeleted) await deleteMeetingAudio(deps, meetingId);
  return 'done';
}

async function audioDeleted(deps: MeetingDeps, meetingId: string): Promise<boolean> {
  const m = await deps.db
    .selectFrom('meetings')
    .select('audio_deleted_at')
    .where('id', '=', meetingId)
    .executeTakeFirst();
  return !m || m.audio_deleted_at !== null;
}

/**
 * Work for the repair job: chunks that arrived for reserved stretches, audio after the cut of a
 * closed timeline, or chunks stored on a closed timeline and not placed yet (WebM pieces to read).
 */
export async function hasRepairWork(db: Executor, meetingId: string): Promise<boolean> {
  const arrived = await db
    .selectFrom('timeline_gaps')
    .select('id')
    .where('meeting_id', '=', meetingId)
    .where('arrived_at', 'is not', null)
    .limit(1)
    .executeTakeFirst();
  if (arrived) return true;
  const m = await db.selectFrom('meetings').selectAll().where('id', '=', meetingId).executeTakeFirst();
  if (!m || m.source !== MeetingSource.live || !closedTimeline(m)) return false;
  if (Number(m.placed_samples) > Number(m.cut_samples)) return true;
  const waiting = await db
    .selectFrom('chunks')
    .select('seq')
    .where('meeting_id', '=', meetingId)
    .where('start_samples', 'is', null)
    .limit(1)
    .executeTakeFirst();
  return waiting !== undefined;
}

/**
 * One sequence number a repair places or reads again: a chunk that arrived for a reserved stretch,
 * or a WebM piece after it that was read without it (its follower).
 */
interface Member {
  seq: number;
  kind: 'late' | 'follower';
  /** Old position and length (the reserved stretch, or the piece as it was read). */
  start: number;
  oldLength: number;
  /** A late WAV chunk's length; WebM lengths come from reading the pieces again. */
  length: number | null;
  energy: Buffer | null;
  gapId: string | null;
  /** What a follower was read from before (compared at commit). */
  basisKey: string | null;
}

/**
 * Consecutive members: one resize of the timeline. Its old stretch always holds a reserved gap, so
 * it is never empty, and a piece that read to nothing cannot make two stretches start at one place.
 */
interface Chain {
  members: Member[];
  start: number;
  oldLength: number;
}

interface RepairSnapshot {
  meeting: MeetingRow;
  empty: boolean;
  input: RepairInput;
  chains: Chain[];
  /** Chunks placed after the cut of a closed timeline: new audio the tail region takes in. */
  tailSeqs: number[];
  /** Everything the plan depends on, compared again at commit. */
  fingerprint: string;
}

const lateSeqs = (snapshot: RepairSnapshot) =>
  snapshot.chains.flatMap((c) => c.members.filter((m) => m.kind === 'late').map((m) => m.seq));

/**
 * What a repair run works on, read in one snapshot: arrived gaps (up to a batch; at commit the same
 * ones again), the WebM pieces after them that were read without them, the live windows around
 * each stretch, and the cut. With `gapIds` it reloads exactly those gaps.
 */
async function loadRepair(
  deps: MeetingDeps,
  db: Executor,
  meetingId: string,
  gapIds: string[] | null,
): Promise<RepairSnapshot | null> {
  const read = async (trx: Executor): Promise<RepairSnapshot | null> => {
    const meeting = await trx
      .selectFrom('meetings')
      .selectAll()
      .where('id', '=', meetingId)
      .executeTakeFirst();
    if (!meeting || meeting.source !== MeetingSource.live) return null;
    const mode = meeting.audio_deleted_at ? 'splice' : 'recut';
    let q = trx
      .selectFrom('timeline_gaps as g')
      .innerJoin('chunks as c', (j) =>
        j.onRef('c.meeting_id', '=', 'g.meeting_id').onRef('c.seq', '=', 'g.first_seq'),
      )
      .select([
        'g.id',
        'g.first_seq',
        'g.start_samples',
        'g.samples as reserved',
        'c.samples',
        'c.format',
        'c.energy',
      ])
      .where('g.meeting_id', '=', meetingId)
      .where('g.arrived_at', 'is not', null)
      .orderBy('g.first_seq')
      .limit(BATCH);
    if (gapIds) q = gapIds.length > 0 ? q.where('g.id', 'in', gapIds) : q.where(sql<boolean>`false`);
    const members: Member[] = (await q.execute()).map((g) => ({
      seq: g.first_seq,
      kind: 'late',
      start: Number(g.start_samples),
      oldLength: Number(g.reserved),
      length: g.format === 'wav' ? (g.samples ?? 0) : null,
      energy: g.energy,
      gapId: g.id,
      basisKey: null,
    }));
    if (meeting.chunk_format === 'webm') {
      const late = new Set(members.map((m) => m.seq));
      for (const g of members.filter((m) => m.kind === 'late')) {
        // The pieces read after it without it (from their next cluster) are read again, up to the
        // first that had been read normally, whose reader state carries over from them.
        for (let seq = g.seq + 1; !late.has(seq); seq++) {
          const c = await trx
            .selectFrom('chunks as c')
            .innerJoin('blobs as b', 'b.id', 'c.blob_id')
            .select(['c.start_samples', 'c.samples', 'c.decoded_after_gap', 'b.deleted_at'])
            .where('c.meeting_id', '=', meetingId)
            .where('c.seq', '=', seq)
            .executeTakeFirst();
          // A piece whose bytes are gone keeps what it was read as (and its segments).
          if (!c || c.start_samples === null || c.samples === null || c.deleted_at !== null) break;
          members.push({
            seq,
            kind: 'follower',
            start: Number(c.start_samples),
            oldLength: c.samples,
            length: null,
            energy: null,
            gapId: null,
            basisKey: (await basisOf(trx, meetingId, seq)).key,
          });
          if (!c.decoded_after_gap) break;
        }
      }
    }
    members.sort((a, b) => a.seq - b.seq);
    const chains: Chain[] = [];
    for (const m of members) {
      const last = chains.at(-1);
      const lastMember = last?.members.at(-1);
      if (last && lastMember && lastMember.seq + 1 === m.seq) {
        last.members.push(m);
        last.oldLength += m.oldLength;
      } else {
        chains.push({ members: [m], start: m.start, oldLength: m.oldLength });
      }
    }
    const resizes: Resize[] = chains.map((c) => ({
      seq: c.members[0]!.seq,
      start: c.start,
      oldLength: c.oldLength,
      newLength: c.members.reduce((n, m) => n + (m.length ?? m.oldLength), 0),
    }));
    const closed = closedTimeline(meeting);
    const cut = Number(meeting.cut_samples);
    const placed = Number(meeting.placed_samples);
    const tail = (closed || mode === 'splice') && placed > cut;
    const tailSeqs = tail
      ? (
          await trx
            .selectFrom('chunks')
            .select('seq')
            .where('meeting_id', '=', meetingId)
            .where('start_samples', '>=', cut)
            .orderBy('seq')
            .execute()
        ).map((c) => c.seq)
      : [];
    const windows = new Map<string, RegionWindow>();
    const touching = async (from: number, to: number) => {
      const base = () =>
        trx
          .selectFrom('windows')
          .select(['id', 'start_samples', 'end_samples', 'status'])
          .where('meeting_id', '=', meetingId)
          .where('status', '<>', WindowStatus.superseded)
          .where('start_samples', 'is not', null);
      const rows = [
        ...(await base()
          .where('start_samples', '<', from)
          .orderBy('start_samples', 'desc')
          .limit(1)
          .execute()),
        ...(await base().where('start_samples', '>=', from).where('start_samples', '<=', to).execute()),
      ];
      for (const w of rows) {
        if (Number(w.end_samples) < from) continue;
        windows.set(w.id, {
          id: w.id,
          start: Number(w.start_samples),
          end: Number(w.end_samples),
          status: w.status,
        });
      }
    };
    for (const r of resizes) await touching(r.start, r.start + r.oldLength);
    if (tail) await touching(cut, cut);
    const input: RepairInput = {
      mode,
      closed,
      resizes,
      windows: [...windows.values()].sort((a, b) => a.start - b.start),
      cut,
      placed,
    };
    const fingerprint = JSON.stringify({
      mode,
      closed,
      cut: closed || mode === 'splice' ? cut : null,
      placed: tail ? placed : null,
      members: members.map((m) => [m.seq, m.gapId, m.start, m.oldLength, m.length, m.basisKey]),
      windows: input.windows.map((w) => [w.id, w.start, w.end]),
    });
    return { meeting, empty: resizes.length === 0 && !tail, input, chains, tailSeqs, fingerprint };
  };
  if (db === deps.db) {
    return deps.db
      .transaction()
      .setIsolationLevel('repeatable read')
      .setAccessMode('read only')
      .execute(read);
  }
  return read(db);
}

/** Late WebM pieces and their followers, read (decoded) from their new basis, outside locks. */
async function decodeResized(deps: MeetingDeps, snapshot: RepairSnapshot): Promise<DecodedPiece[]> {
  if (snapshot.meeting.chunk_format !== 'webm') return [];
  const out: DecodedPiece[] = [];
  for (const chain of snapshot.chains) {
    const seqs = chain.members.map((m) => m.seq);
    const basis = await basisOf(deps.db, snapshot.meeting.id, seqs[0]!);
    // A piece whose bytes are gone reads as nothing; if they went under this plan (the audio was
    // deleted meanwhile), the commit sees the changed follower list and plans again.
    const pieces = await readPieces(deps, snapshot.meeting.id, seqs);
    out.push(...(await decodePieces(deps, snapshot.meeting, basis, pieces)));
  }
  return out;
}

/** A chain member on the repaired timeline: where it starts and how long it is now. */
interface Placement {
  member: Member;
  start: number;
  length: number;
}

interface Prepared {
  plan: RepairPlan;
  resizes: Resize[];
  placements: Placement[];
  /** The chunks' audio on the repaired timeline (new positions), for recognition. */
  sources: ChunkSource[];
}

/**
 * The plan over the timeline as it will be: each chain at its real length, its members one after
 * the other, everything after it moved. Audio that was deleted counts as silence (splice mode
 * plans around it).
 */
async function prepare(
  deps: MeetingDeps,
  snapshot: RepairSnapshot,
  decoded: DecodedPiece[],
): Promise<Prepared> {
  const byDecoded = new Map(decoded.map((d) => [d.seq, d]));
  const lengthOf = (m: Member) => byDecoded.get(m.seq)?.samples ?? m.length ?? m.oldLength;
  const placements: Placement[] = [];
  const resizes: Resize[] = [];
  let shift = 0;
  for (const chain of snapshot.chains) {
    let at = chain.start + shift;
    let newLength = 0;
    for (const m of chain.members) {
      placements.push({ member: m, start: at, length: lengthOf(m) });
      at += lengthOf(m);
      newLength += lengthOf(m);
    }
    resizes.push({ seq: chain.members[0]!.seq, start: chain.start, oldLength: chain.oldLength, newLength });
    shift += newLength - chain.oldLength;
  }
  const input: RepairInput = { ...snapshot.input, resizes };
  const placed = new Set(placements.map((p) => p.member.seq));
  const spans: Span[] = [];
  const sources: ChunkSource[] = [];
  const map = (p: number) => mapPosition(resizes, p);
  for (const region of repairRegions(input)) {
    const stretch = await loadStretch(deps.db, snapshot.meeting.id, region.from, region.to);
    for (const s of stretch.spans) {
      if (s.ref !== undefined && placed.has(s.ref.seq)) continue;
      const at = map(s.start);
      if (at !== null) spans.push({ ...s, start: at });
    }
    for (const src of stretch.sources) {
      if (placed.has(src.seq)) continue;
      const at = map(src.start);
      if (at !== null)
        sources.push({ ...src, start: at, deleted: false, objectKey: src.deleted ? null : src.objectKey });
    }
  }
  for (const p of placements) {
    const d = byDecoded.get(p.member.seq);
    const energy = d ? decodeEnergy(d.energy) : decodeEnergy(p.member.energy);
    const objectKey = d
      ? (d.pcm?.key ?? null)
      : await chunkObjectKey(deps.db, snapshot.meeting.id, p.member.seq);
    const audio = p.length > 0 && objectKey !== null;
    spans.push({ start: p.start, length: p.length, audio, energy: audio ? energy : null });
    sources.push({
      seq: p.member.seq,
      start: p.start,
      length: p.length,
      objectKey: audio ? objectKey : null,
      deleted: false,
    });
  }
  const sortedSpans = [...new Map(spans.map((s) => [`${s.start}:${s.length}:${s.audio}`, s])).values()].sort(
    (a, b) => a.start - b.start,
  );
  const sortedSources = [...new Map(sources.map((s) => [s.seq, s])).values()].sort(
    (a, b) => a.start - b.start,
  );
  const plan = planRepair(input, sortedSpans, cutOptions(deps, snapshot.meeting));
  return { plan, resizes, placements, sources: sortedSources };
}

async function chunkObjectKey(db: Executor, meetingId: string, seq: number): Promise<string | null> {
  const row = await db
    .selectFrom('chunks as c')
    .innerJoin('blobs as b', 'b.id', 'c.blob_id')
    .select(['b.object_key', 'b.deleted_at'])
    .where('c.meeting_id', '=', meetingId)
    .where('c.seq', '=', seq)
    .executeTakeFirst();
  return row && !row.deleted_at ? row.object_key : null;
}

/**
 * The repair's one transaction (J5): the active jobs of the windows it replaces are locked before
 * the meeting (lock order: job, then window or meeting), the snapshot is checked, the old windows
 * are superseded (so nothing below moves them), everything after each chain moves, the chain's
 * chunks take their places, split windows' segments move to their pieces, and the new windows
 * are committed with their segments; a published transcript gets its revision.
 */
async function commitRepair(
  deps: MeetingDeps,
  trx: Tx,
  actor: string,
  snapshot: RepairSnapshot,
  decoded: DecodedPiece[],
  prepared: Prepared,
  recognised: Map<number, TranscriptSegment[]>,
): Promise<{ again: boolean; audioDeleted: boolean }> {
  const meetingId = snapshot.meeting.id;
  const { plan } = prepared;
  if (plan.supersede.length > 0) {
    await trx
      .selectFrom('jobs')
      .select('id')
      .where('subject_id', 'in', plan.supersede)
      .where('status', 'in', [JobStatus.pending, JobStatus.running])
      .orderBy('id')
      .forNoKeyUpdate()
      .execute();
  }
  const meeting = await trx
    .selectFrom('meetings')
    .selectAll()
    .where('id', '=', meetingId)
    .forNoKeyUpdate()
    .executeTakeFirst();
  if (!meeting) throw new Replan();
  const gapIds = snapshot.chains.flatMap((c) => c.members.flatMap((m) => (m.gapId ? [m.gapId] : [])));
  const now = await loadRepair(deps, trx, meetingId, gapIds);
  if (!now || now.fingerprint !== snapshot.fingerprint) throw new Replan();

  // 1. The windows replaced leave the live timeline first: nothing below moves them or their
  //    segments, which the pieces of a split window take by their old times.
  const oldRows = plan.supersede.length
    ? await trx.selectFrom('windows').selectAll().where('id', 'in', plan.supersede).execute()
    : [];
  for (const old of oldRows) {
    // J13: its transcription, if still active, is superseded; its attempt can no longer commit.
    await deps.jobs.supersedeActiveJobs(trx, old.id, JobKind.transcribeWindow, actor);
    const t = WindowTransitions.supersedeWindow;
    await trx
      .updateTable('windows')
      .set({ status: t.to, superseded_at: sql<Date>`now()` })
      .where('id', '=', old.id)
      .where('status', 'in', t.from)
      .execute();
  }

  // 2. Everything after each chain moves by its change in length (last chain first, so each
  //    threshold is still in old positions), then the chain's chunks take their new places.
  for (const [i, chain] of [...snapshot.chains.entries()].reverse()) {
    const r = prepared.resizes[i]!;
    const delta = r.newLength - r.oldLength;
    if (delta !== 0)
      await shiftAfter(trx, meetingId, chain.members.at(-1)!.seq, r.start + r.oldLength, delta);
  }
  const byDecoded = new Map(decoded.map((d) => [d.seq, d]));
  for (const p of prepared.placements) {
    const d = byDecoded.get(p.member.seq);
    if (d) {
      const old = await trx
        .selectFrom('chunks')
        .select('pcm_blob_id')
        .where('meeting_id', '=', meetingId)
        .where('seq', '=', d.seq)
        .executeTakeFirstOrThrow();
      await applyDecoded(trx, meeting, d);
      if (old.pcm_blob_id) await retireBlob(trx, old.pcm_blob_id);
    }
    await trx
      .updateTable('chunks')
      .set({ start_samples: p.start })
      .where('meeting_id', '=', meetingId)
      .where('seq', '=', p.member.seq)
      .execute();
    if (p.member.gapId) await trx.deleteFrom('timeline_gaps').where('id', '=', p.member.gapId).execute();
  }

  // 3. New windows, with the segments they were given or keep.
  let index = await nextWindowIndex(trx, meetingId);
  for (const [i, w] of plan.create.entries()) {
    const old = w.keep ? oldRows.find((o) => o.id === w.keep!.windowId) : undefined;
    const status =
      w.kind === 'transcribe'
        ? WindowStatus.transcribed
        : w.kind === 'silent'
          ? WindowStatus.missing
          : old && old.status !== WindowStatus.pending
            ? old.status
            : WindowStatus.failed;
    const row = {
      id: randomUUID(),
      workspace_id: meeting.workspace_id,
      meeting_id: meetingId,
      index: index++,
      start_ms: samplesToMs(w.start),
      end_ms: samplesToMs(w.end),
      start_samples: w.start,
      end_samples: w.end,
      blob_id: null,
      status,
      failure_code: status === WindowStatus.failed ? (old?.failure_code ?? 'audio.deleted') : null,
      failure_message:
        status === WindowStatus.failed
          ? (old?.failure_message ?? 'its audio was deleted before it was transcribed')
          : null,
      transcribed_at: status === WindowStatus.transcribed ? sql<Date>`now()` : null,
      missing_at: status === WindowStatus.missing ? sql<Date>`now()` : null,
      failed_at: status === WindowStatus.failed ? sql<Date>`now()` : null,
    };
    await trx.insertInto('windows').values(row).execute();
    let count = 0;
    if (w.kind === 'transcribe') {
      const rows = segmentRows(row, recognised.get(i) ?? []).map((seg) => ({
        workspace_id: meeting.workspace_id,
        meeting_id: meetingId,
        window_id: row.id,
        seq: seg.seq,
        start_ms: row.start_ms + seg.start_ms,
        end_ms: row.start_ms + seg.end_ms,
        text: seg.text,
      }));
      if (rows.length > 0) await trx.insertInto('segments').values(rows).execute();
      count = rows.length;
    } else if (w.kind === 'keep' && w.keep) {
      // The old window's segments in this piece move here, by the piece's own shift.
      const fromMs = samplesToMs(w.keep.from);
      const toMs = samplesToMs(w.keep.to);
      const shiftMs = row.start_ms - fromMs;
      const moved = await trx
        .updateTable('segments')
        .set({
          window_id: row.id,
          start_ms: sql<number>`greatest(${row.start_ms}::int, least(${row.end_ms}::int, start_ms + ${shiftMs}::int))`,
          end_ms: sql<number>`least(${row.end_ms}::int, greatest(${row.start_ms}::int, end_ms + ${shiftMs}::int))`,
        })
        .where('window_id', '=', w.keep.windowId)
        .where((eb) => {
          const inPiece = eb.and([eb('start_ms', '>=', fromMs), eb('start_ms', '<', toMs)]);
          if (w.keep!.straddleFrom === null) return inPiece;
          // A segment from the spliced stretch running on into this piece keeps its words here.
          return eb.or([
            inPiece,
            eb.and([
              eb('start_ms', '>=', samplesToMs(w.keep!.straddleFrom)),
              eb('start_ms', '<', fromMs),
              eb('end_ms', '>', fromMs),
            ]),
          ]);
        })
        .executeTakeFirst();
      count = Number(moved.numUpdatedRows);
    }
    await trx.updateTable('windows').set({ segment_count: count }).where('id', '=', row.id).execute();
    await recordAudit(trx, {
      workspaceId: meeting.workspace_id,
      subjectType: 'window',
      subjectId: row.id,
      from: null,
      to: status,
      actor,
      reason: `repair: ${w.kind === 'keep' ? 'kept from a split window' : w.kind === 'silent' ? 'no audio' : 'transcribed again'}`,
    });
  }
  for (const old of oldRows) {
    const dropped = await trx.deleteFrom('segments').where('window_id', '=', old.id).executeTakeFirst();
    await recordAudit(trx, {
      workspaceId: meeting.workspace_id,
      subjectType: 'window',
      subjectId: old.id,
      from: old.status,
      to: WindowStatus.superseded,
      actor,
      reason: `repair: late audio re-cut this stretch (${Number(dropped.numDeletedRows)} segments replaced)`,
    });
  }
  // The cut: where the plan says when it cut through or past the old cut — also when the old cut
  // lay inside a chain's reserved stretch (the shifts leave such a cut where it was, and a chain
  // shorter than reserved ends before it); otherwise the cut as shifted, which any window the
  // cutter added meanwhile after this plan also moved.
  const oldCut = snapshot.input.cut;
  const inside = snapshot.chains.some((c) => oldCut > c.start && oldCut < c.start + c.oldLength);
  await sql`update meetings set cut_samples = case when ${inside} then ${plan.cut}::bigint
              else greatest(cut_samples, ${plan.cut}::bigint) end
             where id = ${meetingId}::uuid`.execute(trx);

  // A published transcript changed: a new revision, the event, and minutes to be rewritten (L19).
  const seqs = [...lateSeqs(snapshot), ...snapshot.tailSeqs];
  const published = meeting.transcript_completed_at !== null;
  const updated = await trx
    .updateTable('meetings')
    .set({
      last_repair_at: sql<Date>`now()`,
      repair_failure_code: null,
      repair_failure_message: null,
      ...(published
        ? {
            transcript_revision: sql<number>`transcript_revision + 1`,
            minutes_status: MinutesStatus.pending,
            minutes_code: null,
            minutes_message: null,
          }
        : {}),
      updated_at: sql<Date>`now()`,
    })
    .where('id', '=', meetingId)
    .returningAll()
    .executeTakeFirstOrThrow();
  await recordAudit(trx, {
    workspaceId: meeting.workspace_id,
    subjectType: 'meeting',
    subjectId: meetingId,
    from: meeting.status,
    to: meeting.status,
    actor,
    reason: `repair committed: ${seqs.length} late chunks placed, ${plan.supersede.length} windows replaced by ${plan.create.length}`,
    details: { lateChunks: seqs, revision: updated.transcript_revision },
  });
  if (published) {
    await emitEvent(trx, {
      workspaceId: meeting.workspace_id,
      type: EventType.meetingTranscriptRevised,
      subjectId: meetingId,
      payload: { meetingId, revision: updated.transcript_revision, lateChunks: seqs },
    });
  }
  return { again: await hasRepairWork(trx, meetingId), audioDeleted: meeting.audio_deleted_at !== null };
}

/**
 * Everything after a chain moves by `delta`: chunks and gaps after its last sequence number (by
 * seq, so a piece that read to nothing at the chain's end moves with what follows it), live
 * windows from `at` on, with their segments, and the cut and the frontier's end.
 */
async function shiftAfter(
  trx: Tx,
  meetingId: string,
  afterSeq: number,
  at: number,
  delta: number,
): Promise<void> {
  await sql`update chunks set start_samples = start_samples + ${delta}::bigint
             where meeting_id = ${meetingId}::uuid and seq > ${afterSeq}::int and start_samples is not null`.execute(
    trx,
  );
  await sql`update timeline_gaps set start_samples = start_samples + ${delta}::bigint
             where meeting_id = ${meetingId}::uuid and first_seq > ${afterSeq}::int`.execute(trx);
  // Windows first (a window's commit in flight is waited for), then their segments, by each
  // window's own move in milliseconds, in a statement that sees that commit.
  const moved = await sql<{ id: string; delta_ms: number; start_ms: number; end_ms: number }>`
    with w as (
      update windows set start_samples = start_samples + ${delta}::bigint, end_samples = end_samples + ${delta}::bigint,
        start_ms = round((start_samples + ${delta}::bigint) / 16.0), end_ms = round((end_samples + ${delta}::bigint) / 16.0)
       where meeting_id = ${meetingId}::uuid and status <> 'superseded' and start_samples >= ${at}::bigint
      returning id, start_ms, end_ms, start_samples
    )
    select id, start_ms, end_ms, (start_ms - round((start_samples - ${delta}::bigint) / 16.0))::int as delta_ms from w`.execute(
    trx,
  );
  // Each segment moves with its window, and stays inside it (rounding to milliseconds may differ
  // by one between a window's start and end).
  if (moved.rows.length > 0) {
    await sql`update segments s
                 set start_ms = least(greatest(s.start_ms + m.delta_ms, m.start_ms), m.end_ms),
                     end_ms = least(greatest(s.end_ms + m.delta_ms, m.start_ms), m.end_ms)
                from jsonb_to_recordset(${JSON.stringify(moved.rows)}::jsonb)
                     as m(id uuid, delta_ms int, start_ms int, end_ms int)
               where s.window_id = m.id`.execute(trx);
  }
  await sql`update meetings set
      cut_samples = case when cut_samples >= ${at}::bigint then cut_samples + ${delta}::bigint else cut_samples end,
      placed_samples = case when placed_samples >= ${at}::bigint then placed_samples + ${delta}::bigint else placed_samples end
    where id = ${meetingId}::uuid`.execute(trx);
}

/** A decoded copy replaced by a new decode goes to the cleanup outbox like any deleted audio. */
async function retireBlob(trx: Tx, blobId: string): Promise<void> {
  const blob = await trx
    .updateTable('blobs')
    .set({ deleted_at: sql<Date>`now()` })
    .where('id', '=', blobId)
    .where('deleted_at', 'is', null)
    .returning(['workspace_id', 'meeting_id', 'object_key', 'size_bytes'])
    .executeTakeFirst();
  if (!blob) return;
  await trx
    .insertInto('object_cleanups')
    .values({
      id: randomUUID(),
      workspace_id: blob.workspace_id,
      meeting_id: blob.meeting_id,
      object_key: blob.object_key,
      bytes: blob.size_bytes,
      state: 'pending',
      reason: 'replaced by a new decode',
    })
    .onConflict((oc) => oc.column('object_key').doNothing())
    .execute();
}
