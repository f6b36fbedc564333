import { sql, type Selectable } from 'kysely';
import type {
  AuditEventsTable,
  BotRecordingsTable,
  Db,
  JobAttemptsTable,
  JobsTable,
  MeetingsTable,
  WindowsTable,
} from '../db/schema.ts';

/**
 * X1/J16: the operator's read-only views for `verbatim inspect` and `verbatim dead-letters`: a
 * meeting, a job or a bot recording with its jobs, their attempts and the audit trail. The CLI
 * formats them; this module only reads. Tokens are never selected (bot recordings hold none).
 */

export type JobRow = Selectable<JobsTable>;
export type AttemptRow = Pick<
  Selectable<JobAttemptsTable>,
  'attempt_no' | 'status' | 'owner' | 'started_at' | 'ended_at' | 'error_code' | 'error_message'
>;
export interface JobDetail {
  job: JobRow;
  attempts: AttemptRow[];
}

export type Inspection =
  | {
      kind: 'meeting';
      meeting: Selectable<MeetingsTable>;
      windows: Array<Selectable<WindowsTable>>;
      jobs: JobDetail[];
      audit: Array<Selectable<AuditEventsTable>>;
    }
  | { kind: 'job'; jobs: JobDetail[]; audit: Array<Selectable<AuditEventsTable>> }
  | {
      kind: 'bot-recording';
      recording: Selectable<BotRecordingsTable>;
      jobs: JobDetail[];
      audit: Array<Selectable<AuditEventsTable>>;
    };

/** What the id names (a meeting first, then a job, then a bot recording), or null for nothing. */
export async function inspection(db: Db, id: string): Promise<Inspection | null> {
  const meeting = await db.selectFrom('meetings').selectAll().where('id', '=', id).executeTakeFirst();
  if (meeting) {
    const windows = await db
      .selectFrom('windows')
      .selectAll()
      .where('meeting_id', '=', id)
      .orderBy('start_ms')
      .orderBy('index')
      .execute();
    const jobIds = await jobIdsWhere(db, 'meeting_id', id);
    return { kind: 'meeting', meeting, windows, ...(await jobsAndTrail(db, id, jobIds)) };
  }
  const job = await db.selectFrom('jobs').select('id').where('id', '=', id).executeTakeFirst();
  if (job) return { kind: 'job', ...(await jobsAndTrail(db, id, [job.id])) };
  const recording = await db.selectFrom('bot_recordings').selectAll().where('id', '=', id).executeTakeFirst();
  if (recording) {
    // R7/R9: the bot's jobs are those whose subject is the recording.
    const jobIds = await jobIdsWhere(db, 'subject_id', id);
    return { kind: 'bot-recording', recording, ...(await jobsAndTrail(db, id, jobIds)) };
  }
  return null;
}

/** A job with its attempts, in order. */
export async function jobDetail(db: Db, jobId: string): Promise<JobDetail | null> {
  const job = await db.selectFrom('jobs').selectAll().where('id', '=', jobId).executeTakeFirst();
  if (!job) return null;
  const attempts = await db
    .selectFrom('job_attempts')
    .select(['attempt_no', 'status', 'owner', 'started_at', 'ended_at', 'error_code', 'error_message'])
    .where('job_id', '=', jobId)
    .orderBy('attempt_no')
    .execute();
  return { job, attempts };
}

/** J16: the newest dead letters (jobs that ended failed), each with what replaced it, if anything. */
export async function deadLetters(
  db: Db,
  limit = 100,
): Promise<Array<JobDetail & { replacement: { id: string; status: string } | null }>> {
  const failed = await db
    .selectFrom('jobs')
    .select('id')
    .where('status', '=', 'failed')
    .orderBy('failed_at', 'desc')
    .limit(limit)
    .execute();
  const out = [];
  for (const { id } of failed) {
    const detail = await jobDetail(db, id);
    if (detail) out.push({ ...detail, replacement: await replacementOf(db, id) });
  }
  return out;
}

async function jobIdsWhere(db: Db, column: 'meeting_id' | 'subject_id', id: string): Promise<string[]> {
  const rows = await db
    .selectFrom('jobs')
    .select('id')
    .where(column, '=', id)
    .orderBy('created_at')
    .execute();
  return rows.map((r) => r.id);
}

async function jobsAndTrail(db: Db, subjectId: string, jobIds: string[]) {
  const jobs: JobDetail[] = [];
  for (const jobId of jobIds) {
    const detail = await jobDetail(db, jobId);
    if (detail) jobs.push(detail);
  }
  const audit = await db
    .selectFrom('audit_events')
    .selectAll()
    .where((eb) =>
      eb.or([eb('subject_id', '=', subjectId), eb('subject_id', 'in', jobIds.length ? jobIds : [subjectId])]),
    )
    .orderBy('id')
    .execute();
  return { jobs, audit };
}

/** The newest later job of the same subject and kind: what an operator's resubmission made. */
async function replacementOf(db: Db, jobId: string): Promise<{ id: string; status: string } | null> {
  // Compared in SQL: a JavaScript Date would cut the job's own timestamp to milliseconds.
  const row = await sql<{ id: string; status: string }>`
    select later.id, later.status from jobs later join jobs dead on dead.id = ${jobId}::uuid
     where later.subject_id = dead.subject_id and later.kind = dead.kind and later.id <> dead.id
       and later.created_at > dead.created_at
     order by later.created_at desc limit 1`.execute(db);
  return row.rows[0] ?? null;
}
