import type { Tx } from '../db/schema.ts';
import { MeetingStatus } from '../domain/status.ts';
import { AppError } from '../domain/errors.ts';
import { SAMPLE_RATE, quietBoundary, type CutOptions } from '../domain/timeline.ts';
import type { MeetingDeps } from './deps.ts';
import { loadStretch, type ChunkSource } from './timeline-rows.ts';
import { stretchAudio } from './window-audio.ts';
import {
  countShedDraft,
  coveredByFinal,
  draftLag,
  draftSubject,
  enqueueDraftTask,
  insertDraft,
} from './draft-store.ts';

/**
 * L22: draft captions, a fast and disposable layer above the windows.
 *
 * Each chunk placed on a live meeting's timeline while it is being recorded gets a `draft-chunk`
 * transport job, enqueued in the placing transaction. The job transcribes that chunk (from the quiet
 * edge near the end of the chunk before it to the one near its own end) and
 * stores the words as a draft (`drafts`), which the meeting's stream sends at once. A window's
 * final words replace the drafts whose middle falls inside it (a trigger drops them at the
 * window's commit), and the client drops them from view on the window's event.
 *
 * Drafts are best effort: one delivery, no retry, no attempt rows, no audit, nothing a window
 * waits for. A draft job that starts more than `draftLagMs` after its chunk was placed is skipped
 * and counted on the meeting (`drafts_shed`): under load the drafts give way, the finals keep their
 * pace. They never touch a window or a segment, so the finals are the same with drafts on or off.
 */
export { DRAFT_TASK } from './draft-store.ts';

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
  await enqueueDraftTask(trx, meetingId, seq);
}

/** Whether chunks placed now get drafts: a live meeting still being recorded. */
export function draftsWanted(status: string): boolean {
  return status === MeetingStatus.recording || status === MeetingStatus.created;
}

/** The draft job: transcribes one placed chunk, unless it is too late to be worth it. */
export async function makeDraft(deps: MeetingDeps, payload: DraftPayload): Promise<DraftOutcome> {
  // Behind: this draft is late, or the meeting's finals wait for a worker (a window job due for
  // longer than the same bound). Either way the recogniser is better spent on the finals.
  const lag = await draftLag(deps.db, payload.meetingId, payload.placedAt, deps.config.draftLagMs);
  if (lag.ms > deps.config.draftLagMs || lag.finalsWaiting) {
    await countShedDraft(deps.db, payload.meetingId);
    return 'shed';
  }
  const chunk = await draftSubject(deps.db, payload.meetingId, payload.seq);
  if (!chunk || chunk.start_samples === null || !chunk.samples) return 'gone';
  const stretch = await draftStretch(
    deps,
    payload.meetingId,
    payload.seq,
    Number(chunk.start_samples),
    chunk.samples,
  );
  const startMs = Math.round((stretch.from * 1000) / SAMPLE_RATE);
  const endMs = Math.round((stretch.to * 1000) / SAMPLE_RATE);
  if (await coveredByFinal(deps.db, payload.meetingId, startMs, endMs)) return 'covered';

  await deps.checkpoints.hit('draft.recognise', { seq: payload.seq });
  let wav: Buffer;
  try {
    wav = await stretchAudio(deps, stretch.sources, stretch.from, stretch.to);
  } catch (err) {
    // The audio went with the meeting (deleted, or the close-out finished): nothing to show.
    if (err instanceof AppError && err.code === 'audio.deleted') return 'gone';
    throw err;
  }
  const recogniser = deps.draftTranscriber ?? deps.transcriber;
  const segments = await recogniser.transcribe({ wav, language: chunk.language });
  const text = segments
    .map((s) => s.text.trim())
    .filter(Boolean)
    .join(' ');
  if (!text) return 'empty';
  // The window may have committed while the chunk was being recognised: then its words win. Its
  // row is held shared until this commits, so a commit racing this one comes after, and its
  // trigger drops this draft.
  const inserted = await deps.db.transaction().execute(async (trx) => {
    if (await coveredByFinal(trx, payload.meetingId, startMs, endMs, true)) return false;
    return insertDraft(trx, {
      workspaceId: chunk.workspace_id,
      meetingId: payload.meetingId,
      seq: payload.seq,
      startMs,
      endMs,
      text,
    });
  });
  return inserted ? 'made' : 'covered';
}

/** How far before a chunk's end its draft may stop at a quiet frame; the rest opens the next draft. */
const EDGE_SEARCH = SAMPLE_RATE;
const EDGE: CutOptions = { slot: 0, search: EDGE_SEARCH, frame: SAMPLE_RATE / 10, minTail: 0 };

/**
 * The stretch chunk `seq` drafts: from the quiet edge near the end of the chunk before it (when
 * that chunk is placed right before this one) to the quiet edge near this chunk's end. Edges
 * depend on one chunk's audio only, so consecutive drafts meet without a gap or an overlap, and a
 * word spoken across two chunks is read whole by one of them instead of cut in two.
 */
async function draftStretch(
  deps: MeetingDeps,
  meetingId: string,
  seq: number,
  start: number,
  length: number,
): Promise<{ from: number; to: number; sources: ChunkSource[] }> {
  const end = start + length;
  const { spans, sources } = await loadStretch(deps.db, meetingId, Math.max(0, start - 1), end);
  const previous = spans.find(
    (s) => s.ref?.kind === 'chunk' && s.ref.seq === seq - 1 && s.audio && s.start + s.length === start,
  );
  const from = previous ? quietBoundary(spans, start, previous.start, EDGE) : start;
  const to = quietBoundary(spans, end, start, EDGE);
  return { from, to, sources };
}
