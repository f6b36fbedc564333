import assert from 'node:assert/strict';
import { encodeWav, parseWav } from '../../src/domain/wav.ts';
import { speechWav, type Harness } from './harness.ts';

/** Live meetings in tests: 5 s chunks, as the browser sends them, and the settings they run with. */
export const CHUNK_SECONDS = 5;

export const LIVE_ENV = {
  VERBATIM_WINDOW_SECONDS: '8',
  VERBATIM_BOUNDARY_SEARCH_SECONDS: '2',
  VERBATIM_CHUNK_SECONDS: String(CHUNK_SECONDS),
};

/** Synthetic speech cut into 5 s WAV chunks, as the browser sends them. */
export function chunksOf(text: string): Buffer[] {
  const audio = parseWav(speechWav(text))!;
  const size = CHUNK_SECONDS * audio.sampleRate;
  const out: Buffer[] = [];
  for (let i = 0; i < audio.samples.length; i += size) {
    out.push(encodeWav(audio.samples.subarray(i, i + size), audio.sampleRate));
  }
  return out;
}

export async function createLive(h: Harness): Promise<string> {
  const res = await h.request('POST', '/v1/meetings', { source: 'live', title: 'standup' });
  assert.equal(res.status, 201);
  return res.json.id as string;
}

export function putChunk(h: Harness, id: string, seq: number, body: Buffer, type = 'audio/wav') {
  return h.request('PUT', `/v1/meetings/${id}/chunks/${seq}`, body, { 'content-type': type });
}

export async function streamAndEnd(h: Harness, chunks: Buffer[]): Promise<string> {
  const id = await createLive(h);
  for (const [seq, chunk] of chunks.entries()) assert.equal((await putChunk(h, id, seq, chunk)).status, 201);
  assert.equal((await h.request('POST', `/v1/meetings/${id}/end`)).status, 202);
  return id;
}

/** The meeting's one close-out job and its attempts' statuses, in order. */
export async function closeOutJob(h: Harness, meetingId: string) {
  const jobs = await h.app.database.db
    .selectFrom('jobs')
    .selectAll()
    .where('kind', '=', 'close-out-meeting')
    .where('meeting_id', '=', meetingId)
    .execute();
  assert.equal(
    jobs.length,
    1,
    'one close-out job for the meeting, returned to the queue rather than replaced',
  );
  const attempts = await h.app.database.db
    .selectFrom('job_attempts')
    .select('status')
    .where('job_id', '=', jobs[0]!.id)
    .orderBy('attempt_no')
    .execute();
  return { job: jobs[0]!, attempts: attempts.map((a) => a.status) };
}
