import { sql } from 'kysely';
import type { Tx } from '../db/schema.ts';
import { MeetingStatus } from '../domain/status.ts';
import type { MeetingDeps } from './deps.ts';

/**
 * L22: draft captions, a fast and disposable layer above the windows.
 *
 * Each chunk placed on a live meeting's timeline while it is being recorded gets a `draft-chunk`
 * transport job, enqueued in the placing transaction. The job transcribes that chunk alone and
 * stores the words as a draft (`drafts`), which the meeting's stream sends at once. A window's
 * final words replace the drafts whose middle falls inside it (a trigger drops them at the
 * window's commit), and the client drops them from view on the window's event.
 *
 * Drafts are best effort: one delivery, no retry, no attempt rows, no audit, nothing a window
 * waits for. A draft job that starts more than `draftLagMs` after its chunk was placed is skipped
 * and counted on the meeting (`drafts_shed`): under load the drafts give way, the finals keep their
 * pace. They never touch a window or a segment, so the finals are the same with drafts on or off.
 */
export const DRAFT_TASK = 'draft-chunk';

export interface DraftPayload {
  meetingId: string;
  seq: number;
  /** When the chunk was placed, by the database's clock. */
  placedAt: string;
}

export type DraftOutcome = 'made' | 'shed' | 'empty' | 'covered' | 'gone';

/** In the transaction that placed chunk `seq` of a meeting being recorded: its draft job. */
export async function enqueueDraft(
  deps: MeetingDeps,
  trx: Tx,
  meetingId: string,
  seq: number,
): Promise<void> {
  if (!deps.config.drafts) return;
  await sql`select verbatim_enqueue(
      ${DRAFT_TASK}::text,
      json_build_object('meetingId', ${meetingId}::text, 'seq', ${seq}::int, 'placedAt', now()),
      now(),
      1,
      null::text
    )`.execute(trx);
}

/** Whether chunks placed now get drafts: a live meeting still being recorded. */
export function draftsWanted(status: string): boolean {
  return status === MeetingStatus.recording || status === MeetingStatus.created;
}

/** The draft job: transcribes one placed chunk, unless it is too late to be worth it. */
export async function makeDraft(deps: MeetingDeps, payload: DraftPayload): Promise<DraftOutcome> {
  // Behind: this draft is late, or the meeting's finals wait for a worker (a window job due for
  // longer than the same bound). Either way the recogniser is better spent on the finals.
  const lag = await sql<{ ms: number; finalsWaiting: boolean }>`
    select extract(epoch from now() - ${payload.placedAt}::timestamptz) * 1000 as ms,
           exists (select 1 from jobs
                    where meeting_id = ${payload.meetingId}::uuid and kind = 'transcribe-window'
                      and status = 'pending'
                      and run_after < now() - ${deps.config.draftLagMs} * interval '1 millisecond') as "finalsWaiting"`.execute(
    deps.db,
  );
  if (Number(lag.rows[0]!.ms) > deps.config.draftLagMs || lag.rows[0]!.finalsWaiting) {
    await deps.db
      .updateTable('meetings')
      .set({ drafts_shed: sql<number>`drafts_shed + 1` })
      .where('id', '=', payload.meetingId)
      .execute();
    return 'shed';
  }
  const chunk = await deps.db
    .selectFrom('chunks as c')
    .innerJoin('blobs as b', (j) =>
      j.on(sql<boolean>`b.id = case when c.format = 'webm' then c.pcm_blob_id else c.blob_id end`),
    )
    .select(['c.workspace_id', 'c.start_samples', 'c.samples', 'b.object_key', 'b.deleted_at'])
    .where('c.meeting_id', '=', payload.meetingId)
    .where('c.seq', '=', payload.seq)
    .executeTakeFirst();
  if (!chunk || chunk.start_samples === null || !chunk.samples || chunk.deleted_at !== null) return 'gone';
  const startMs = Math.round(Number(chunk.start_samples) / 16);
  const endMs = Math.round((Number(chunk.start_samples) + chunk.samples) / 16);
  if (await coveredByFinal(deps, payload.meetingId, startMs, endMs)) return 'covered';
  const meeting = await deps.db
    .selectFrom('meetings')
    .select('language')
    .where('id', '=', payload.meetingId)
    .executeTakeFirst();
  if (!meeting) return 'gone';

  await deps.checkpoints.hit('draft.recognise', { seq: payload.seq });
  const wav = await deps.blobs.get(chunk.object_key);
  const segments = await deps.transcriber.transcribe({ wav, language: meeting.language });
  const text = segments
    .map((s) => s.text.trim())
    .filter(Boolean)
    .join(' ');
  if (!text) return 'empty';
  // The window may have committed while the chunk was being recognised: then its words win. Its
  // row is held shared until this commits, so a commit racing this one comes after, and its
  // trigger drops this draft.
  const inserted = await deps.db.transaction().execute(async (trx) => {
    if (await coveredByFinal(deps, payload.meetingId, startMs, endMs, trx, true)) return false;
    const row = await trx
      .insertInto('drafts')
      .values({
        workspace_id: chunk.workspace_id,
        meeting_id: payload.meetingId,
        chunk_seq: payload.seq,
        start_ms: startMs,
        end_ms: endMs,
        text,
      })
      .onConflict((oc) => oc.columns(['meeting_id', 'chunk_seq']).doNothing())
      .returning('id')
      .executeTakeFirst();
    return row !== undefined;
  });
  return inserted ? 'made' : 'covered';
}

/** Whether a transcribed window already holds the middle of this stretch. */
async function coveredByFinal(
  deps: MeetingDeps,
  meetingId: string,
  startMs: number,
  endMs: number,
  db: Tx | MeetingDeps['db'] = deps.db,
  lock = false,
): Promise<boolean> {
  const middle = Math.floor((startMs + endMs) / 2);
  const query = db
    .selectFrom('windows')
    .select('status')
    .where('meeting_id', '=', meetingId)
    .where('status', '<>', 'superseded')
    .where('start_ms', '<=', middle)
    .where('end_ms', '>', middle);
  const rows = await (lock ? query.forShare() : query).execute();
  return rows.some((r) => r.status === 'transcribed');
}
