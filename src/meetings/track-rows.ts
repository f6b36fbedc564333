import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import type { Executor, MeetingRow, Tx } from '../db/schema.ts';
import { MeetingSource } from '../domain/status.ts';
import { decodeEnergy, SAMPLE_RATE } from '../domain/timeline.ts';
import type { EnergySpan } from '../domain/tracks.ts';
import { recordAudit } from '../jobs/audit-store.ts';
import { newTranscriptRevision } from './late-window-store.ts';

/** L25: the rows of a live meeting's tracks (src/domain/tracks.ts has the rules). */

export interface TrackRow {
  id: string;
  track: string;
  offsetMs: number;
  status: string;
  transcriptPublished: boolean;
}

/** The parent's tracks beside its own, oldest first. */
export async function tracksOf(db: Executor, parentId: string): Promise<TrackRow[]> {
  const rows = await db
    .selectFrom('meetings')
    .select(['id', 'track', 'track_offset_ms', 'status', 'transcript_completed_at'])
    .where('parent_id', '=', parentId)
    .orderBy('created_at')
    .orderBy('track')
    .execute();
  return rows.map((r) => ({
    id: r.id,
    track: r.track!,
    offsetMs: r.track_offset_ms ?? 0,
    status: r.status,
    transcriptPublished: r.transcript_completed_at !== null,
  }));
}

export async function trackByName(trx: Tx, parentId: string, track: string): Promise<MeetingRow | undefined> {
  return trx
    .selectFrom('meetings')
    .selectAll()
    .where('parent_id', '=', parentId)
    .where('track', '=', track)
    .executeTakeFirst();
}

/** A new track of `parent`, a live meeting of its own, with its audit row. */
export async function insertTrack(
  trx: Tx,
  parent: MeetingRow,
  track: string,
  offsetMs: number,
  actor: string,
): Promise<MeetingRow> {
  const row = await trx
    .insertInto('meetings')
    .values({
      id: randomUUID(),
      workspace_id: parent.workspace_id,
      source: MeetingSource.live,
      title: `${parent.title} (${track})`.slice(0, 300),
      language: parent.language,
      status: 'created',
      window_ms: parent.window_ms,
      parent_id: parent.id,
      track,
      track_offset_ms: offsetMs,
      // U4: a track is read as its meeting is.
      owner_user_id: parent.owner_user_id,
      visibility: parent.visibility,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  await recordAudit(trx, {
    workspaceId: parent.workspace_id,
    subjectType: 'meeting',
    subjectId: row.id,
    from: null,
    to: row.status,
    actor,
    reason: `track ${track} of meeting ${parent.id}, from ${offsetMs} ms`,
  });
  return row;
}

/**
 * The energy of a meeting's placed chunks, moved by `offsetMs` onto its parent's timeline; only
 * those overlapping `range` (parent's timeline) when given.
 */
export async function energySpans(
  db: Executor,
  meetingId: string,
  offsetMs: number,
  range?: { fromMs: number; toMs: number },
): Promise<EnergySpan[]> {
  let q = db
    .selectFrom('chunks')
    .select(['start_samples', 'samples', 'energy'])
    .where('meeting_id', '=', meetingId)
    .where('start_samples', 'is not', null);
  if (range) {
    const from = Math.floor(((range.fromMs - offsetMs) * SAMPLE_RATE) / 1000);
    const to = Math.ceil(((range.toMs - offsetMs) * SAMPLE_RATE) / 1000);
    q = q.where(sql<boolean>`start_samples + coalesce(samples, 0) > ${from}`).where('start_samples', '<', to);
  }
  const rows = await q.orderBy('start_samples').execute();
  return rows.map((r) => ({
    startMs: (Number(r.start_samples) * 1000) / SAMPLE_RATE + offsetMs,
    lengthMs: (Number(r.samples ?? 0) * 1000) / SAMPLE_RATE,
    energy: decodeEnergy(r.energy),
  }));
}

/** A new revision of a parent whose transcript was published; undefined while it is not. */
export async function reviseParentRow(
  trx: Tx,
  parentId: string,
): Promise<{ id: string; workspace_id: string; transcript_revision: number } | undefined> {
  return trx
    .updateTable('meetings')
    .set({ ...newTranscriptRevision(), updated_at: sql<Date>`now()` })
    .where('id', '=', parentId)
    .where('transcript_completed_at', 'is not', null)
    .returning(['id', 'workspace_id', 'transcript_revision'])
    .executeTakeFirst();
}
