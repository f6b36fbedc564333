import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import type { Tx } from '../db/schema.ts';
import { EventType, JobKind, WindowStatus, WindowTransitions } from '../domain/status.ts';
import { emitEvent } from '../events/outbox-store.ts';
import { recordAudit } from '../jobs/audit-store.ts';
import type { TranscriptSegment } from '../ports.ts';
import type { MeetingDeps } from './deps.ts';
import { newTranscriptRevision, publishSettledLateWindows } from './late-window-store.ts';
import { retireBlob } from '../storage/blob-rows.ts';
import { applyDecoded, type DecodedPiece } from './live-webm.ts';
import { lateSeqs, loadRepair, Replan, type Prepared, type RepairSnapshot } from './repair-plan.ts';
import { hasRepairWork } from './repair-rows.ts';
import { nextWindowIndex, samplesToMs } from './timeline-rows.ts';
import { segmentRows } from './transcription.ts';

/**
 * The repair's one transaction (J5): the active jobs of the windows it replaces are locked before
 * the meeting (lock order: job, then window or meeting), the snapshot is checked, the old windows
 * are superseded (so nothing below moves them), everything after each chain moves, the chain's
 * chunks take their places, split windows' segments move to their pieces, and the new windows
 * are committed with their segments; a published transcript gets its revision.
 */
export async function commitRepair(
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
    await deps.jobs.lockActiveJobsOf(trx, plan.supersede);
  }
  const meeting = await deps.meetings.lockIfExists(trx, meetingId);
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
      if (old.pcm_blob_id) await retireBlob(trx, old.pcm_blob_id, 'replaced by a new decode');
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
      ...(published ? newTranscriptRevision() : {}),
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
    // A window marked at publication that this repair superseded has settled: count again.
    await publishSettledLateWindows(deps, trx, meetingId, actor);
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
