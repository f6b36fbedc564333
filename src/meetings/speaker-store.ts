import { sql } from 'kysely';
import type { Executor, Tx, WordTimes } from '../db/schema.ts';
import type { SpeakerSource, SpeakerTurn, SpokenSegment } from '../domain/speakers.ts';
import { newTranscriptRevision } from './late-window-store.ts';

/** W1: a meeting's speaker as stored. */
export interface SpeakerRow {
  id: string;
  key: string;
  source: SpeakerSource;
  label: string;
  display_name: string | null;
  user_id: string | null;
  merged_into: string | null;
}

const SPEAKER_COLUMNS = ['id', 'key', 'source', 'label', 'display_name', 'user_id', 'merged_into'] as const;

/** The meeting's speakers, merged ones included, oldest first. */
export async function speakersOf(db: Executor, meetingId: string): Promise<SpeakerRow[]> {
  return db
    .selectFrom('speakers')
    .select(SPEAKER_COLUMNS)
    .where('meeting_id', '=', meetingId)
    .orderBy('created_at')
    .orderBy('key')
    .execute();
}

export async function speakerById(
  db: Executor,
  meetingId: string,
  id: string,
): Promise<SpeakerRow | undefined> {
  return db
    .selectFrom('speakers')
    .select(SPEAKER_COLUMNS)
    .where('meeting_id', '=', meetingId)
    .where('id', '=', id)
    .executeTakeFirst();
}

/**
 * Makes sure each speaker a source named exists (a label it already has is kept: a person's name
 * is never overwritten by a source's). Returns every one of them by key.
 */
export async function ensureSpeakers(
  trx: Tx,
  meeting: { id: string; workspace_id: string },
  speakers: Array<{ key: string; source: SpeakerSource; label: string }>,
): Promise<Map<string, SpeakerRow>> {
  if (speakers.length > 0)
    await trx
      .insertInto('speakers')
      .values(
        speakers.map((s) => ({
          workspace_id: meeting.workspace_id,
          meeting_id: meeting.id,
          key: s.key,
          source: s.source,
          label: s.label.slice(0, 200),
        })),
      )
      .onConflict((oc) => oc.columns(['meeting_id', 'key']).doNothing())
      .execute();
  const rows = await speakersOf(trx, meeting.id);
  return new Map(rows.map((r) => [r.key, r]));
}

/** R11: the meeting's speaker timeline is replaced whole (an import run twice leaves one copy). */
export async function replaceTurns(
  trx: Tx,
  meeting: { id: string; workspace_id: string },
  turns: Array<{ speakerId: string; startMs: number; endMs: number }>,
): Promise<void> {
  await trx.deleteFrom('speaker_turns').where('meeting_id', '=', meeting.id).execute();
  for (let i = 0; i < turns.length; i += 1_000)
    await trx
      .insertInto('speaker_turns')
      .values(
        turns.slice(i, i + 1_000).map((t) => ({
          workspace_id: meeting.workspace_id,
          meeting_id: meeting.id,
          speaker_id: t.speakerId,
          start_ms: t.startMs,
          end_ms: t.endMs,
        })),
      )
      .execute();
}

/** The meeting's turns, keyed by their speaker's key. */
export async function turnsOf(db: Executor, meetingId: string): Promise<SpeakerTurn[]> {
  const rows = await db
    .selectFrom('speaker_turns as t')
    .innerJoin('speakers as s', 's.id', 't.speaker_id')
    .select(['t.start_ms', 't.end_ms', 's.key'])
    .where('t.meeting_id', '=', meetingId)
    .orderBy('t.start_ms')
    .execute();
  return rows.map((r) => ({ startMs: r.start_ms, endMs: r.end_ms, speakerKey: r.key }));
}

/** The meeting's segments with their own speaker keys and word times (absolute), in order. */
export async function spokenSegmentsOf(
  db: Executor,
  meetingId: string,
  range?: { fromMs: number; toMs: number },
): Promise<SpokenSegment[]> {
  let query = db
    .selectFrom('segments')
    .select(['start_ms', 'end_ms', 'text', 'speaker_key', 'words'])
    .where('meeting_id', '=', meetingId);
  if (range) query = query.where('end_ms', '>', range.fromMs).where('start_ms', '<', range.toMs);
  const rows = await query.orderBy('start_ms').orderBy('seq').execute();
  return rows.map((r) => ({
    startMs: r.start_ms,
    endMs: r.end_ms,
    text: r.text,
    speakerKey: r.speaker_key,
    words: absoluteWords(r.start_ms, r.words),
  }));
}

function absoluteWords(startMs: number, words: WordTimes | null): SpokenSegment['words'] {
  if (!Array.isArray(words) || words.length === 0) return null;
  return words.map(([from, to, text]) => ({ startMs: startMs + from, endMs: startMs + to, text }));
}

/** W4: a person names a speaker. */
export async function renameSpeaker(trx: Tx, id: string, displayName: string | null): Promise<void> {
  await trx
    .updateTable('speakers')
    .set({ display_name: displayName, updated_at: sql<Date>`now()` })
    .where('id', '=', id)
    .execute();
}

/**
 * W4: `from` (and every speaker already merged into it) becomes `into`: its segments and turns
 * read as `into`'s. Kept as a row, so the source's key keeps pointing at the person.
 */
export async function mergeSpeaker(
  trx: Tx,
  meetingId: string,
  fromId: string,
  intoId: string,
): Promise<void> {
  await trx
    .updateTable('speakers')
    .set({ merged_into: intoId, updated_at: sql<Date>`now()` })
    .where('meeting_id', '=', meetingId)
    .where((eb) => eb.or([eb('id', '=', fromId), eb('merged_into', '=', fromId)]))
    .execute();
}

/**
 * Who said what changed: the meeting is touched, and a published transcript gets a new revision
 * (its minutes to be written again). Returns the transcript's revision.
 */
export async function speakersChanged(trx: Tx, meetingId: string, published: boolean): Promise<number> {
  const updated = await trx
    .updateTable('meetings')
    .set({ ...(published ? newTranscriptRevision() : {}), updated_at: sql<Date>`now()` })
    .where('id', '=', meetingId)
    .returning(['transcript_revision'])
    .executeTakeFirstOrThrow();
  return updated.transcript_revision;
}

/** W3: the recogniser speakers of a meeting that have a reference clip, oldest first. */
export async function speakerReferences(
  db: Executor,
  meetingId: string,
  limit: number,
): Promise<Array<{ id: string; key: string; reference: Buffer }>> {
  const rows = await db
    .selectFrom('speakers')
    .select(['id', 'key', 'reference'])
    .where('meeting_id', '=', meetingId)
    .where('source', '=', 'recogniser')
    .where('merged_into', 'is', null)
    .where('reference', 'is not', null)
    .orderBy('created_at')
    .limit(limit)
    .execute();
  return rows.flatMap((r) => (r.reference ? [{ id: r.id, key: r.key, reference: r.reference }] : []));
}

/** W3: keeps a clip of a speaker's voice (the first one kept stays). */
export async function saveSpeakerReference(trx: Tx, speakerId: string, wav: Buffer): Promise<void> {
  await trx
    .updateTable('speakers')
    .set({ reference: wav })
    .where('id', '=', speakerId)
    .where('reference', 'is', null)
    .execute();
}

/** W3: the meeting's audio is gone, and with it the clips of its speakers' voices. */
export async function dropSpeakerReferences(db: Executor, meetingId: string): Promise<void> {
  await db
    .updateTable('speakers')
    .set({ reference: null })
    .where('meeting_id', '=', meetingId)
    .where('reference', 'is not', null)
    .execute();
}

/** How many speakers of a source the meeting has (to number new ones). */
export async function countSpeakers(db: Executor, meetingId: string, source: SpeakerSource): Promise<number> {
  const row = await db
    .selectFrom('speakers')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('meeting_id', '=', meetingId)
    .where('source', '=', source)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/** W7: the workspace's vocabulary. */
export async function vocabularyOf(db: Executor, workspaceId: string): Promise<string[]> {
  const row = await db
    .selectFrom('workspaces')
    .select('vocabulary')
    .where('id', '=', workspaceId)
    .executeTakeFirst();
  return row?.vocabulary ?? [];
}

export async function saveVocabulary(db: Executor, workspaceId: string, terms: string[]): Promise<void> {
  await db.updateTable('workspaces').set({ vocabulary: terms }).where('id', '=', workspaceId).execute();
}
