// Frozen migration: never edit after release, add a new file instead. Imports nothing from the app.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
-- A live meeting's chunks are all WAV or all WebM. A WebM chunk's audio is known only once every
-- chunk before it has been read, so its sample count and decoded audio come later.
alter table meetings add column chunk_format text check (chunk_format in ('wav', 'webm'));
-- The WebM stream's header (EBML header, Segment, Info, Tracks), from its first chunk.
alter table meetings add column stream_header bytea;
alter table chunks add column format text not null default 'wav' check (format in ('wav', 'webm'));
alter table chunks alter column samples drop not null;
-- The decoded 16 kHz audio of a WebM chunk.
alter table chunks add column pcm_blob_id uuid references blobs(id);
-- Where the WebM reader stood after this chunk: unfinished bytes, cluster time, priming blocks.
alter table chunks add column stream_state jsonb;
alter table blobs drop constraint blobs_kind_check;
alter table blobs add constraint blobs_kind_check check (kind in ('recording', 'window', 'chunk', 'chunk-pcm'));
`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
alter table blobs drop constraint blobs_kind_check;
alter table blobs add constraint blobs_kind_check check (kind in ('recording', 'window', 'chunk'));
alter table chunks drop column stream_state, drop column pcm_blob_id, drop column format;
alter table chunks alter column samples set not null;
alter table meetings drop column stream_header, drop column chunk_format;
`.execute(db);
}
