import { randomUUID } from 'node:crypto';
import type { Tx } from '../db/schema.ts';
import { EventType, JobKind, WindowStatus } from '../domain/status.ts';
import { repairCut, repairedWindowStatus, samplesToMs } from '../domain/timeline.ts';
import { emitEvent } from '../events/outbox-store.ts';
import { recordAudit } from '../jobs/audit-store.ts';
import { retireBlob } from '../storage/blob-rows.ts';
import { reviseParent } from './tracks.ts';
import type { MeetingDeps } from './deps.ts';
import { publishSettledLateWindows } from './late-windows.ts';
import { applyDecoded, type DecodedPiece } from './live-webm.ts';
import {
  chunkPcmBlob,
  dropSegments,
  insertRepairWindow,
  insertWindowSegments,
  markRepairCommitted,
  moveKeptSegments,
  placeRepairedChunk,
  saveRepairCut,
  setSegmentCount,
  shiftAfter,
  supersedeWindow,
  windowsById,
} from './repair-commit-rows.ts';
import { lateSeqs, loadRepair, Replan, type Prepared, type RepairSnapshot } from './repair-plan.ts';
import { hasRepairWork } from './repair-rows.ts';
import { nextWindowIndex } from './timeline-rows.ts';
import { segmentRows, type Recognised } from './transcription.ts';

/**
 * The repair's one transaction (J5): the active jobs of the windows it replaces are locked before
 * the meeting (lock order: job, then window or meeting), the snapshot is checked, the old windows
 * are superseded (so nothing below moves them), everything after each chain moves, the chain's
 * chunks take their places, split windows' segments move to their pieces, and the new windows
 * are committed with their segments; a published transcript gets its revision. The statuses of
 * the new windows and the cut are decided in src/domain/timeline.ts; the writes are in
 * repair-commit-rows.ts.
 */
export async function commitRepair(
  deps: MeetingDeps,
  trx: Tx,
  actor: string,
  snapshot: RepairSnapshot,
  decoded: DecodedPiece[],
  prepared: Prepared,
  recognised: Map<number, Recognised>,
): Promise<{ again: boolean; audioDeleted: boolean }> {
  const meetingId = snapshot.meeting.id;
  const { plan } = prepared;
  if (plan.supersede.length > 0) {
    await deps.jobs.lockActiveJobsOf(trx, plan.supersede);
  }
  const meeting = await deps.meetings.lockIfExists(trx, meetingId);
  if (!meeting) throw new Replan();
  const gapIds = snapshot.chains.flatMap((c) => c.members.flatMap((m) => (m.gapId ? [m.gapId] : [])));
  const now = await loadRepair(deps, trx, meetingId, gapIds);
  if (!now || now.fingerprint !== snapshot.fingerprint) throw new Replan();

  // 1. The windows replaced leave the live timeline first: nothing below moves them or their
  //    segments, which the pieces of a split window take by their old times.
  const oldRows = await windowsById(trx, plan.supersede);
  for (const old of oldRows) {
    // J13: its transcription, if still active, is superseded; its attempt can no longer commit.
    await deps.jobs.supersedeActiveJobs(trx, old.id, JobKind.transcribeWindow, actor);
    await supersedeWindow(trx, old.id);
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
      const oldPcm = await chunkPcmBlob(trx, meetingId, d.seq);
      await applyDecoded(trx, meeting, d);
      if (oldPcm) await retireBlob(trx, oldPcm, 'replaced by a new decode');
    }
    await placeRepairedChunk(trx, meetingId, p.member.seq, p.start, p.member.gapId ?? null);
  }

  // 3. New windows, with the segments they were given or keep.
  let index = await nextWindowIndex(trx, meetingId);
  for (const [i, w] of plan.create.entries()) {
    const old = w.keep ? oldRows.find((o) => o.id === w.keep!.windowId) : undefined;
    const decided = repairedWindowStatus(w.kind, old);
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
      status: decided.status,
      failure_code: decided.failureCode,
      failure_message: decided.failureMessage,
    };
    await insertRepairWindow(trx, row);
    let count = 0;
    if (w.kind === 'transcribe') {
      const r = recognised.get(i);
      count = await insertWindowSegments(trx, row, segmentRows(row, r?.segments ?? [], null, r?.clusterKeys));
    } else if (w.kind === 'keep' && w.keep) {
      count = await moveKeptSegments(trx, row, w.keep);
    }
    await setSegmentCount(trx, row.id, count);
    await recordAudit(trx, {
      workspaceId: meeting.workspace_id,
      subjectType: 'window',
      subjectId: row.id,
      from: null,
      to: decided.status,
      actor,
      reason: `repair: ${w.kind === 'keep' ? 'kept from a split window' : w.kind === 'silent' ? 'no audio' : 'transcribed again'}`,
    });
  }
  for (const old of oldRows) {
    const dropped = await dropSegments(trx, old.id);
    await recordAudit(trx, {
      workspaceId: meeting.workspace_id,
      subjectType: 'window',
      subjectId: old.id,
      from: old.status,
      to: WindowStatus.superseded,
      actor,
      reason: `repair: late audio re-cut this stretch (${dropped} segments replaced)`,
    });
  }
  await saveRepairCut(trx, meetingId, repairCut(snapshot.chains, snapshot.input.cut, plan.cut));

  // A published transcript changed: a new revision, the event, and minutes to be rewritten (L19).
  const seqs = [...lateSeqs(snapshot), ...snapshot.tailSeqs];
  const published = meeting.transcript_completed_at !== null;
  const updated = await markRepairCommitted(trx, meetingId, published);
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
  if (published && meeting.parent_id !== null) {
    await reviseParent(trx, meeting, { lateChunks: seqs });
    await publishSettledLateWindows(deps, trx, meetingId, actor);
  } else if (published) {
    await emitEvent(trx, {
      workspaceId: meeting.workspace_id,
      type: EventType.meetingTranscriptRevised,
      subjectId: meetingId,
      payload: { meetingId, revision: updated.transcript_revision, lateChunks: seqs },
    });
    // A window marked at publication that this repair superseded has settled: count again.
    await publishSettledLateWindows(deps, trx, meetingId, actor);
  }
  return { again: await hasRepairWork(trx, meetingId), audioDeleted: meeting.audio_deleted_at !== null };
}
