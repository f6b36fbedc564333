import assert from 'node:assert/strict';
import { it } from 'node:test';
import { sql } from 'kysely';
import { AttemptOutcome, CONSUMERS_OF, EventType, JobKind } from '../src/domain/status.ts';
import {
  SPEECH,
  speechWav,
  startHarness,
  uploadMeeting,
  waitFor,
  waitForMeeting,
} from './support/harness.ts';

const wav = speechWav(SPEECH);

void it('J5: the close-out’s completion commits the meeting’s transition, its audit row, its outbox events and the job’s completion together, or none of them', async () => {
  const h = await startHarness({
    // Room for a few refused completions: the rule under test is atomicity, not the error budget.
    env: { VERBATIM_CLOSEOUT_MAX_ERRORS: '20' },
  });
  const db = h.app.database.db;
  // The probe changes the schema: as the owner (the app's role may not, S10).
  const owner = h.db.owner();
  try {
    // The outbox refuses the meeting's completion event while the probe is armed: the last write of
    // the completing transaction fails, after the meeting's transition and its audit row were made.
    await sql`create table j5_probe (armed boolean not null)`.execute(owner);
    await sql`insert into j5_probe values (true)`.execute(owner);
    await sql`grant select on j5_probe to public`.execute(owner);
    await sql`create function j5_refuse() returns trigger language plpgsql as $$
      begin
        if new.event_type = ${sql.lit(EventType.meetingCompleted)} and (select armed from j5_probe) then
          raise exception 'J5 probe: the outbox refuses this event';
        end if;
        return new;
      end $$`.execute(owner);
    await sql`create trigger j5_refuse before insert on outbox
      for each row execute function j5_refuse()`.execute(owner);

    h.spawnWorker();
    const id = await uploadMeeting(h, wav);
    const closeOut = await waitFor('a close-out attempt to fail on the refused event', async () => {
      const row = await db
        .selectFrom('job_attempts')
        .innerJoin('jobs', 'jobs.id', 'job_attempts.job_id')
        .select(['jobs.id as jobId', 'job_attempts.status', 'job_attempts.error_message'])
        .where('jobs.meeting_id', '=', id)
        .where('jobs.kind', '=', JobKind.closeOutMeeting)
        .where('job_attempts.status', '=', AttemptOutcome.retryableFailed)
        .executeTakeFirst();
      return row;
    });
    assert.match(closeOut.error_message ?? '', /J5 probe/, 'the attempt failed on the outbox write');

    // Nothing of the refused completion is visible: not the meeting's status, not its audit row,
    // not the job's completion, not the event.
    const meeting = await db
      .selectFrom('meetings')
      .select('status')
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
    assert.notEqual(meeting.status, 'complete', 'the meeting did not complete without its event');
    const completedAudit = await db
      .selectFrom('audit_events')
      .select('id')
      .where('subject_id', '=', id)
      .where('to_status', '=', 'complete')
      .execute();
    assert.equal(completedAudit.length, 0, 'no audit row for a transition that did not commit');
    const job = await db
      .selectFrom('jobs')
      .select('status')
      .where('id', '=', closeOut.jobId)
      .executeTakeFirstOrThrow();
    assert.notEqual(job.status, 'completed', 'the job did not complete without its writes');
    const events = await db
      .selectFrom('outbox')
      .select('id')
      .where('subject_id', '=', id)
      .where('event_type', '=', EventType.meetingCompleted)
      .execute();
    assert.equal(events.length, 0);

    // Disarmed, the retried close-out completes everything once.
    await sql`update j5_probe set armed = false`.execute(owner);
    await waitForMeeting(h, id);
    const after = await db
      .selectFrom('outbox')
      .select('consumer')
      .where('subject_id', '=', id)
      .where('event_type', '=', EventType.meetingCompleted)
      .execute();
    assert.deepEqual(
      after.map((e) => e.consumer).sort(),
      [...CONSUMERS_OF[EventType.meetingCompleted]].sort(),
      'one event per consumer, once',
    );
    const audit = await db
      .selectFrom('audit_events')
      .select('id')
      .where('subject_id', '=', id)
      .where('to_status', '=', 'complete')
      .execute();
    assert.equal(audit.length, 1, 'the meeting completed once');
    const attempts = await db
      .selectFrom('job_attempts')
      .select(['status'])
      .where('job_id', '=', closeOut.jobId)
      .orderBy('attempt_no')
      .execute();
    assert.ok(attempts.some((a) => a.status === AttemptOutcome.retryableFailed));
    assert.equal(attempts.at(-1)!.status, AttemptOutcome.completed);
    const done = await db
      .selectFrom('jobs')
      .select('status')
      .where('id', '=', closeOut.jobId)
      .executeTakeFirstOrThrow();
    assert.equal(done.status, 'completed');
  } finally {
    await h.close();
  }
});
