import { sql } from 'kysely';
import type { Executor } from '../db/schema.ts';
import type { Correction } from '../domain/corrections.ts';

/** E1: what the meetings list shows of each meeting: its first words and who spoke. */
export interface MeetingPreviewRow {
  meetingId: string;
  lines: Array<{ startMs: number; endMs: number; text: string }>;
  /** E3: the corrections that start before the last of those lines ends. */
  corrections: Correction[];
  speakers: string[];
}

/** The first PREVIEW_LINES segments and the (unmerged) speakers' names of each meeting. */
export const PREVIEW_LINES = 4;

export async function previewsOf(db: Executor, meetingIds: string[]): Promise<MeetingPreviewRow[]> {
  if (meetingIds.length === 0) return [];
  const rows = await sql<{
    meeting_id: string;
    lines: Array<{ startMs: number; endMs: number; text: string }> | null;
    corrections: Array<Omit<Correction, 'createdAt'> & { createdAt: string }> | null;
    speakers: string[] | null;
  }>`
    select m.id as meeting_id,
           first.lines,
           (select json_agg(json_build_object('id', c.id, 'startMs', c.start_ms, 'endMs', c.end_ms,
                                              'originalText', c.original_text, 'text', c.text,
                                              'createdAt', c.created_at))
              from transcript_corrections c
             where c.meeting_id = m.id and c.start_ms < first.last_end) as corrections,
           (select array_agg(coalesce(sp.display_name, sp.label) order by sp.created_at)
              from speakers sp where sp.meeting_id = m.id and sp.merged_into is null) as speakers
      from meetings m
      left join lateral (
        select json_agg(json_build_object('startMs', s.start_ms, 'endMs', s.end_ms, 'text', s.text) order by s.start_ms) as lines,
               max(s.end_ms) as last_end
          from (select start_ms, end_ms, text from segments
                 where meeting_id = m.id and btrim(text) <> ''
                 order by start_ms, seq limit ${PREVIEW_LINES}) s) first on true
     where m.id = any(${meetingIds}::uuid[])`.execute(db);
  return rows.rows.map((r) => ({
    meetingId: r.meeting_id,
    lines: r.lines ?? [],
    corrections: (r.corrections ?? []).map((c) => ({ ...c, createdAt: new Date(c.createdAt) })),
    speakers: r.speakers ?? [],
  }));
}
