import { sql } from 'kysely';
import type { Db, Executor, Tx } from '../db/schema.ts';
import {
  minutesLines,
  parseMarks,
  searchConfigFor,
  segmentHit,
  transcriptPassages,
  withoutRepeatedMinutes,
  type SearchFilters,
  type SearchHit,
  type SearchPage,
  type StretchSegments,
} from '../domain/search.ts';

/** At most this many matching passages are ranked per query: a word said in every meeting stays fast. */
export const RANKED_CANDIDATES = 2000;
/** Hits shown per meeting in a result. */
export const HITS_PER_MEETING = 3;
/** A stretch of transcript indexed as one passage: at most this many segments, within this long. */
export const STRETCH_SEGMENTS = 6;
export const STRETCH_MS = 30_000;

// ts_headline's marks: control characters that speech recognition never produces, turned into
// offsets by the domain (`parseMarks`), so no HTML ever leaves the database.
const MARK_START = '\u0001';
const MARK_STOP = '\u0002';

export type IndexOutcome = 'indexed' | 'current' | 'not_published' | 'gone';

export interface LedgerEntry {
  meetingId: string;
  workspaceId: string;
}

export interface LedgerStats {
  /** Published meetings the index is behind on. */
  meetings: number;
  /** Seconds since the oldest of them was published or last changed; 0 when there is none. */
  oldestSeconds: number;
}

/**
 * O2/O4: the search index's tables (search_passages, search_index_state). Every statement about
 * them lives here.
 */
export class SearchStore {
  constructor(private readonly db: Db) {}

  /**
   * Brings a meeting's index rows to its current transcript revision and minutes, in one
   * transaction. Idempotent on (meeting, revision): a meeting already indexed at its current
   * revision and minutes is left alone, and an older event can never write older text, because
   * the text is always read from the meeting as it is now. Two indexers of one meeting take turns.
   */
  async indexMeeting(
    trx: Tx,
    meetingId: string,
    /** W6: the transcript as read, with its speakers (src/meetings/transcript-read.ts). */
    readLines: (
      trx: Tx,
    ) => Promise<Array<{ startMs: number; endMs: number; text: string; speaker: { name: string } | null }>>,
    beforeCommit?: () => Promise<void>,
  ): Promise<IndexOutcome> {
    await sql`select pg_advisory_xact_lock(hashtextextended(${`verbatim.search:${meetingId}`}, 0))`.execute(
      trx,
    );
    // Shared with the writers that move a transcript on (a repair holds the meeting's lock), so
    // the revision read here and the segments read below agree.
    const meeting = await trx
      .selectFrom('meetings')
      .select([
        'id',
        'workspace_id',
        'language',
        'transcript_revision',
        'transcript_completed_at',
        'minutes',
        'parent_id',
      ])
      .where('id', '=', meetingId)
      .forShare()
      .executeTakeFirst();
    if (!meeting) return 'gone';
    if (!meeting.transcript_completed_at || meeting.parent_id !== null) return 'not_published';
    // Compared in the database: the times carry microseconds that a JavaScript Date would drop.
    const current = await sql<{ current: boolean }>`
      select s.transcript_revision >= m.transcript_revision
             and s.minutes_written_at is not distinct from m.minutes_written_at as current
        from search_index_state s join meetings m on m.id = s.meeting_id
       where s.meeting_id = ${meetingId}`.execute(trx);
    if (current.rows[0]?.current) return 'current';
    const lang = searchConfigFor(meeting.language);
    await trx.deleteFrom('search_passages').where('meeting_id', '=', meetingId).execute();
    // Stretches of up to STRETCH_SEGMENTS consecutive lines of one speaker within STRETCH_MS: six
    // times fewer rows than one per segment, and each keeps its lines' times for the hit (segmentHit).
    const stretches = transcriptPassages(await readLines(trx), STRETCH_SEGMENTS, STRETCH_MS);
    for (let i = 0; i < stretches.length; i += 500)
      await trx
        .insertInto('search_passages')
        .values(
          stretches.slice(i, i + 500).map((p) => ({
            workspace_id: meeting.workspace_id,
            meeting_id: meetingId,
            kind: 'transcript' as const,
            start_ms: p.startMs,
            end_ms: p.endMs,
            text: p.text,
            segments: JSON.stringify(p.segments),
            speaker: p.speaker,
            lang,
          })),
        )
        .execute();
    const lines = minutesLines(meeting.minutes);
    if (lines.length > 0) {
      await trx
        .insertInto('search_passages')
        .values(
          lines.map((text) => ({
            workspace_id: meeting.workspace_id,
            meeting_id: meetingId,
            kind: 'minutes' as const,
            start_ms: null,
            end_ms: null,
            text,
            lang,
          })),
        )
        .execute();
    }
    const passages = stretches.length + lines.length;
    await sql`insert into search_index_state (meeting_id, workspace_id, transcript_revision, minutes_written_at, passages)
      select id, workspace_id, transcript_revision, minutes_written_at, ${passages}::int from meetings where id = ${meetingId}
      on conflict (meeting_id) do update set transcript_revision = excluded.transcript_revision,
        minutes_written_at = excluded.minutes_written_at, passages = excluded.passages, indexed_at = now()`.execute(
      trx,
    );
    await beforeCommit?.();
    return 'indexed';
  }

  /** The ledger: published meetings whose index is missing or behind, oldest first. */
  async ledger(limit: number, db: Executor = this.db): Promise<LedgerEntry[]> {
    const rows = await sql<{ meeting_id: string; workspace_id: string }>`
      select m.id as meeting_id, m.workspace_id
        from meetings m left join search_index_state s on s.meeting_id = m.id
       where m.transcript_completed_at is not null and m.parent_id is null
         and (s.meeting_id is null or s.transcript_revision < m.transcript_revision
              or s.minutes_written_at is distinct from m.minutes_written_at)
       order by m.updated_at
       limit ${limit}`.execute(db);
    return rows.rows.map((r) => ({ meetingId: r.meeting_id, workspaceId: r.workspace_id }));
  }

  async ledgerStats(db: Executor = this.db): Promise<LedgerStats> {
    const row = await sql<{ meetings: string; oldest: number | null }>`
      select count(*) as meetings, extract(epoch from now() - min(m.updated_at))::float8 as oldest
        from meetings m left join search_index_state s on s.meeting_id = m.id
       where m.transcript_completed_at is not null and m.parent_id is null
         and (s.meeting_id is null or s.transcript_revision < m.transcript_revision
              or s.minutes_written_at is distinct from m.minutes_written_at)`.execute(db);
    const r = row.rows[0];
    return { meetings: Number(r?.meetings ?? 0), oldestSeconds: Math.max(0, Math.round(r?.oldest ?? 0)) };
  }

  /**
   * O4: the meetings whose passages match `query` (websearch syntax), best first, each with its
   * best hits. Runs in the caller's tenant transaction (row-level security) and filters by the
   * workspace itself too.
   */
  async search(
    trx: Tx,
    workspaceId: string,
    query: string,
    filters: SearchFilters,
    page: { offset: number; limit: number },
  ): Promise<SearchPage> {
    // The workspace is the tenant transaction's own (verbatim_search reads it); the
    // parameter is checked against it, so a caller cannot pass another.
    await sql`select 1 where nullif(current_setting('verbatim.workspace_id', true), '')::uuid = ${workspaceId}::uuid`
      .execute(trx)
      .then((r) => {
        if (r.rows.length !== 1) throw new Error("search must run in its workspace's tenant transaction");
      });
    const meetings = await sql<{
      meeting_id: string;
      title: string;
      created_at: Date;
      source: string;
      status: string;
      best: number;
      hits: string;
      passage_ids: string[];
    }>`select * from verbatim_search(${query}, ${filters.from ?? null}::timestamptz,
        ${filters.to ?? null}::timestamptz, ${filters.source ?? null}::text, ${filters.status ?? null}::text,
        ${page.offset}::int, ${page.limit + 1}::int, ${RANKED_CANDIDATES}::int, ${HITS_PER_MEETING}::int,
        ${filters.speaker ?? null}::text)`.execute(trx);
    const more = meetings.rows.length > page.limit;
    const shown = meetings.rows.slice(0, page.limit);
    if (shown.length === 0) return { results: [], more: false };
    // Each meeting's best passages, as the meeting query ranked them, read by id.
    const order = shown.flatMap((m) => m.passage_ids);
    const found = await sql<{
      id: string;
      meeting_id: string;
      kind: 'transcript' | 'minutes';
      segments: StretchSegments | null;
      speaker: string | null;
      marked: string;
    }>`
      select p.id, p.meeting_id, p.kind, p.segments, p.speaker,
             ts_headline(p.lang, p.text, websearch_to_tsquery(p.lang, ${query}),
               ${`StartSel=${MARK_START},StopSel=${MARK_STOP},HighlightAll=true`}) as marked
        from search_passages p
       where p.id in (${sql.join(order.map((id) => sql`${id}::bigint`))})`.execute(trx);
    const byId = new Map(found.rows.map((r) => [String(r.id), r]));
    const byMeeting = new Map<string, SearchHit[]>();
    for (const h of order.flatMap((id) => byId.get(String(id)) ?? [])) {
      const list = byMeeting.get(h.meeting_id) ?? [];
      list.push(
        h.kind === 'transcript' && h.segments
          ? { ...segmentHit(h.marked, h.segments, SEARCH_MARKS), speaker: h.speaker }
          : {
              kind: 'minutes',
              startMs: null,
              endMs: null,
              speaker: null,
              ...parseMarks(h.marked, SEARCH_MARKS),
            },
      );
      byMeeting.set(h.meeting_id, list);
    }
    return {
      more,
      results: shown.map((m) => ({
        meeting: {
          id: m.meeting_id,
          title: m.title,
          createdAt: m.created_at,
          source: m.source,
          status: m.status,
        },
        score: m.best,
        hitCount: Number(m.hits),
        hits: withoutRepeatedMinutes(byMeeting.get(m.meeting_id) ?? []),
      })),
    };
  }
}

export const SEARCH_MARKS = { start: MARK_START, stop: MARK_STOP };
