import { randomUUID } from 'node:crypto';
import { sql, type RawBuilder } from 'kysely';
import type { Db, Executor, MeetingRow, MeetingsTable, Tx } from '../db/schema.ts';
import { AppError, ErrorKind } from '../domain/errors.ts';
import { MeetingStatus, MeetingTransitions, MinutesStatus, type MeetingSource } from '../domain/status.ts';
import { recordAudit } from '../jobs/audit-store.ts';
import type { TranscriptSegment } from '../ports.ts';
import type { Updateable } from 'kysely';
import { ClientCode } from '../domain/client-codes.ts';
import { isUuid } from '../domain/ids.ts';
import type { Visibility } from '../domain/roles.ts';

export interface NewMeeting {
  source: MeetingSource;
  title: string;
  language: string | null;
  windowMs: number;
  /** J14: the upload batch it belongs to. */
  batchId?: string | null;
  /** B11: 'speakers' when each channel of the upload is a speaker. */
  channels?: 'speakers' | null;
  /** U4: who made it (null: a service account); who may read it (default workspace). */
  ownerUserId?: string | null;
  visibility?: Visibility;
}

export interface WindowCounts {
  total: number;
  transcribed: number;
  /** Pending windows whose job is still being attempted (L5: the only ones worth waiting for). */
  inFlight: number;
  /**
   * J20: pending windows whose job is isolated and waits out its slow backoff: awaiting
   * transcription, their audio held; their meeting does not wait for them.
   */
  held: number;
  /** Windows whose retries ran out. */
  exhausted: number;
  /** J20: of those, the ones whose audio is still held (a resubmission can still transcribe them). */
  exhaustedAudioKept: number;
  /** Windows with no audio, or pending with no active job (never registered, or lost). */
  missing: number;
}

export type MeetingTransition = keyof typeof MeetingTransitions;
/** The transitions that end a meeting. */
export type EndTransition = 'completeMeeting' | 'failMeeting';

/**
 * Reads take an optional executor so the API can run them in a tenant transaction (withTenant,
 * src/db/tenant.ts); without one they run on the system path and see every workspace.
 */
export class PgMeetingStore {
  constructor(private readonly db: Db) {}

  /** `alsoInTx` runs in the creating transaction: whatever must not outlive a missing meeting. */
  async create(
    workspaceId: string,
    input: NewMeeting,
    alsoInTx?: (trx: Tx, row: MeetingRow) => Promise<void>,
  ): Promise<MeetingRow> {
    return this.db.transaction().execute(async (trx) => {
      if (input.batchId) {
        // J14: shared with other creators, exclusive with a cancel: no meeting slips into a
        // batch while it is being canceled.
        const batch = await trx
          .selectFrom('batches')
          .select('canceled_at')
          .where('id', '=', input.batchId)
          .where('workspace_id', '=', workspaceId)
          .forShare()
          .executeTakeFirst();
        if (!batch) throw new AppError(ErrorKind.notFound, 'batch.not_found', `no batch ${input.batchId}`);
        if (batch.canceled_at) {
          throw new AppError(ErrorKind.conflict, 'batch.canceled', `batch ${input.batchId} was canceled`);
        }
      }
      const row = await trx
        .insertInto('meetings')
        .values({
          id: randomUUID(),
          workspace_id: workspaceId,
          source: input.source,
          title: input.title,
          language: input.language,
          status: 'created',
          window_ms: input.windowMs,
          batch_id: input.batchId ?? null,
          channels: input.channels ?? null,
          owner_user_id: input.ownerUserId ?? null,
          visibility: input.visibility ?? 'workspace',
        })
        .returningAll()
        .executeTakeFirstOrThrow();
      await recordAudit(trx, {
        workspaceId,
        subjectType: 'meeting',
        subjectId: row.id,
        from: null,
        to: row.status,
        actor: `user:${workspaceId}`,
      });
      await alsoInTx?.(trx, row);
      return row;
    });
  }

  /** U4: who may read a meeting (404 when the caller cannot). */
  async access(
    trx: Tx,
    workspaceId: string,
    meetingId: string,
  ): Promise<{ ownerUserId: string | null; visibility: string; sharedWith: string[] }> {
    const meeting = await this.get(workspaceId, meetingId, trx);
    const shares = await trx
      .selectFrom('meeting_shares')
      .select('user_id')
      .where('meeting_id', '=', meeting.id)
      .orderBy('user_id')
      .execute();
    return {
      ownerUserId: meeting.owner_user_id,
      visibility: meeting.visibility,
      sharedWith: shares.map((s) => s.user_id),
    };
  }

  /** U4: sets a meeting's visibility and its shares (replacing them); its tracks follow. */
  async setAccess(
    trx: Tx,
    workspaceId: string,
    meetingId: string,
    visibility: Visibility,
    sharedWith: string[],
  ): Promise<void> {
    const meeting = await this.get(workspaceId, meetingId, trx);
    // The meeting's lock, which a new track's insert takes too: no track is made with the old one.
    await this.lock(trx, meeting.id);
    await trx
      .updateTable('meetings')
      .set({ visibility })
      .where('workspace_id', '=', workspaceId)
      .where((eb) => eb.or([eb('id', '=', meeting.id), eb('parent_id', '=', meeting.id)]))
      .execute();
    await trx.deleteFrom('meeting_shares').where('meeting_id', '=', meeting.id).execute();
    if (sharedWith.length > 0)
      await trx
        .insertInto('meeting_shares')
        .values(
          sharedWith.map((userId) => ({
            meeting_id: meeting.id,
            user_id: userId,
            workspace_id: workspaceId,
          })),
        )
        .execute();
  }

  /** U4: a meeting's owner (null: a service account's), or undefined when it cannot be read. */
  async ownerOf(workspaceId: string, meetingId: string): Promise<string | null | undefined> {
    if (!isUuid(meetingId)) return undefined;
    const row = await this.db
      .selectFrom('meetings')
      .select('owner_user_id')
      .where('workspace_id', '=', workspaceId)
      .where('id', '=', meetingId)
      .executeTakeFirst();
    return row ? row.owner_user_id : undefined;
  }

  /**
   * The meeting an earlier create with this Idempotency-Key made: undefined when the key is new,
   * `meeting: null` when that meeting has since been deleted (a key is never reused).
   */
  async madeWithKey(workspaceId: string, key: string): Promise<{ meeting: MeetingRow | null } | undefined> {
    const row = await this.db
      .selectFrom('meeting_create_keys as k')
      .leftJoin('meetings as m', 'm.id', 'k.meeting_id')
      .select(['k.key', 'm.id'])
      .where('k.workspace_id', '=', workspaceId)
      .where('k.key', '=', key)
      .executeTakeFirst();
    if (!row) return undefined;
    return { meeting: row.id ? await this.get(workspaceId, row.id) : null };
  }

  /**
   * A create under a key `madeWithKey` found new. Tries that race each other are told apart by the
   * key's primary key: one makes the meeting, the others answer it (`replayed`).
   */
  async createWithKey(
    workspaceId: string,
    key: string,
    input: NewMeeting,
  ): Promise<{ meeting: MeetingRow | null; replayed: boolean }> {
    try {
      const meeting = await this.create(workspaceId, input, async (trx, row) => {
        await trx
          .insertInto('meeting_create_keys')
          .values({ workspace_id: workspaceId, key, meeting_id: row.id })
          .execute();
      });
      return { meeting, replayed: false };
    } catch (err) {
      if ((err as { constraint?: string }).constraint !== 'meeting_create_keys_pkey') throw err;
      const winner = await this.madeWithKey(workspaceId, key);
      if (!winner) throw err;
      return { meeting: winner.meeting, replayed: true };
    }
  }

  /** Scoped read (S1): another workspace's meeting is indistinguishable from a missing one. */
  async get(workspaceId: string, id: string, db: Executor = this.db): Promise<MeetingRow> {
    if (!isUuid(id)) throw notFound(id);
    const row = await db
      .selectFrom('meetings')
      .selectAll()
      .where('workspace_id', '=', workspaceId)
      .where('id', '=', id)
      .executeTakeFirst();
    if (!row) throw notFound(id);
    return row;
  }

  /** Worker-side read of a meeting named by one of its own jobs, locked for the transaction. */
  async lock(trx: Tx, id: string): Promise<MeetingRow> {
    return trx
      .selectFrom('meetings')
      .selectAll()
      .where('id', '=', id)
      .forNoKeyUpdate()
      .executeTakeFirstOrThrow();
  }

  /** The meeting row locked, or undefined when it was deleted. */
  async lockIfExists(trx: Tx, id: string): Promise<MeetingRow | undefined> {
    return trx.selectFrom('meetings').selectAll().where('id', '=', id).forNoKeyUpdate().executeTakeFirst();
  }

  /** A meeting by id alone, for a job that already holds its id (never for a request: see get). */
  async byId(id: string, db: Executor = this.db): Promise<MeetingRow> {
    return db.selectFrom('meetings').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
  }

  /** A meeting by id alone, or undefined when it was deleted. */
  async findById(id: string, db: Executor = this.db): Promise<MeetingRow | undefined> {
    return db.selectFrom('meetings').selectAll().where('id', '=', id).executeTakeFirst();
  }

  /**
   * O2: the minutes' new status (and, when written, the minutes and the transcript revision they
   * describe); the meeting's revision goes up, so its stream and list show the change.
   */
  async setMinutes(
    trx: Tx,
    id: string,
    outcome: {
      status: MinutesStatus;
      error: { code: string; message: string } | null;
      minutes: unknown;
      revision: number;
    },
  ): Promise<void> {
    await trx
      .updateTable('meetings')
      .set({
        minutes_status: outcome.status,
        minutes_code: outcome.error?.code ?? null,
        minutes_message: outcome.error?.message ?? null,
        ...(outcome.minutes
          ? {
              minutes: JSON.stringify(outcome.minutes),
              minutes_written_at: sql<Date>`now()`,
              minutes_revision: outcome.revision,
            }
          : {}),
        revision: sql<number>`revision + 1`,
        updated_at: sql<Date>`now()`,
      })
      .where('id', '=', id)
      .execute();
  }

  /** O2: minutes asked for again (a Regenerate): pending, with no error shown. */
  async askForMinutes(trx: Tx, id: string): Promise<void> {
    await trx
      .updateTable('meetings')
      .set({ minutes_status: MinutesStatus.pending, minutes_code: null, minutes_message: null })
      .where('id', '=', id)
      .execute();
  }

  /** L16: when the meeting's audio was first handed to cleanup (kept from the first time). */
  async markAudioDeleted(trx: Tx, id: string): Promise<void> {
    await trx
      .updateTable('meetings')
      .set({ audio_deleted_at: sql<Date>`coalesce(audio_deleted_at, now())` })
      .where('id', '=', id)
      .execute();
  }

  /** The meeting with how long its minutes have been awaited since the transcript was published (ms). */
  async withMinutesWait(id: string): Promise<MeetingRow & { minutes_waited_ms: string | null }> {
    return this.db
      .selectFrom('meetings')
      .selectAll()
      .select(
        sql<string | null>`extract(epoch from now() - transcript_completed_at) * 1000`.as(
          'minutes_waited_ms',
        ),
      )
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
  }

  /** L7: minutes still pending when the close-out stops waiting fail with a reason (Regenerate). */
  async giveUpOnMinutes(trx: Tx, id: string): Promise<void> {
    await trx
      .updateTable('meetings')
      .set({
        minutes_status: MinutesStatus.failed,
        minutes_code: 'minutes.not_started',
        minutes_message: 'The minutes were never written; use Regenerate.',
      })
      .where('id', '=', id)
      .where('minutes_status', '=', MinutesStatus.pending)
      .execute();
  }

  /** L4 (4): the transcript is final: published now, the minutes pending, what it lacks counted. */
  async publishTranscript(trx: Tx, id: string, counts: WindowCounts, minutes = true): Promise<void> {
    await trx
      .updateTable('meetings')
      .set({
        transcript_completed_at: sql<Date>`now()`,
        minutes_status: minutes ? MinutesStatus.pending : MinutesStatus.none,
        untranscribed_in_flight: counts.inFlight + counts.held,
        untranscribed_exhausted: counts.exhausted + counts.missing,
        revision: sql<number>`revision + 1`,
        updated_at: sql<Date>`now()`,
      })
      .where('id', '=', id)
      .execute();
  }

  /** How long the close-out has waited for windows in retry or a repair (0 before it started). */
  async closeoutWaitedMs(id: string): Promise<number> {
    const row = await this.db
      .selectFrom('meetings')
      .select(
        sql<string>`extract(epoch from now() - coalesce(closeout_wait_started_at, now())) * 1000`.as('ms'),
      )
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
    return Number(row.ms);
  }

  /** The close-out's wait starts now, unless it started before. */
  async startCloseoutWait(trx: Tx, id: string): Promise<void> {
    await trx
      .updateTable('meetings')
      .set({ closeout_wait_started_at: sql<Date>`coalesce(closeout_wait_started_at, now())` })
      .where('id', '=', id)
      .execute();
  }

  /** L19: the format of the meeting's chunks, fixed by its first one. */
  async setChunkFormat(trx: Tx, id: string, format: 'wav' | 'webm'): Promise<MeetingRow> {
    return trx
      .updateTable('meetings')
      .set({ chunk_format: format })
      .where('id', '=', id)
      .returningAll()
      .executeTakeFirstOrThrow();
  }

  /** L20: End said how many chunks the meeting has. */
  async declareChunks(trx: Tx, id: string, chunks: number): Promise<MeetingRow> {
    return trx
      .updateTable('meetings')
      .set({ declared_chunks: chunks })
      .where('id', '=', id)
      .returningAll()
      .executeTakeFirstOrThrow();
  }

  /** The meeting's rows and everything recorded under it (its objects were handed to cleanup first). */
  async deleteRows(trx: Tx, id: string): Promise<void> {
    await trx.deleteFrom('segments').where('meeting_id', '=', id).execute();
    await trx.deleteFrom('windows').where('meeting_id', '=', id).execute();
    await trx.deleteFrom('chunks').where('meeting_id', '=', id).execute();
    await trx.deleteFrom('timeline_gaps').where('meeting_id', '=', id).execute();
    await trx.deleteFrom('blobs').where('meeting_id', '=', id).execute();
    await trx.deleteFrom('meetings').where('id', '=', id).execute();
  }

  /** The split decoded the whole recording and cut its last window: its duration is known. */
  async recordSplitFinished(trx: Tx, id: string, durationMs: number): Promise<void> {
    await trx
      .updateTable('meetings')
      .set({ duration_ms: durationMs, windows_cut_at: sql<Date>`now()`, updated_at: sql<Date>`now()` })
      .where('id', '=', id)
      .execute();
  }

  /** L19: why adding late audio to this meeting failed for good, shown to the operator. */
  async recordRepairFailure(trx: Tx, id: string, error: { code: string; message: string }): Promise<void> {
    await trx
      .updateTable('meetings')
      .set({
        repair_failure_code: error.code,
        repair_failure_message: error.message,
        updated_at: sql<Date>`now()`,
      })
      .where('id', '=', id)
      .execute();
  }

  /** Whether the meeting's audio was deleted (true too when the meeting itself is gone). */
  async audioDeleted(id: string, db: Executor = this.db): Promise<boolean> {
    const m = await db
      .selectFrom('meetings')
      .select('audio_deleted_at')
      .where('id', '=', id)
      .executeTakeFirst();
    return !m || m.audio_deleted_at !== null;
  }

  /** E3: a person renames a meeting. */
  async rename(trx: Tx, id: string, title: string): Promise<void> {
    await trx
      .updateTable('meetings')
      .set({ title, updated_at: sql<Date>`now()` })
      .where('id', '=', id)
      .execute();
  }

  async list(
    workspaceId: string,
    opts: {
      status?: MeetingStatus;
      limit: number;
      before?: { createdAt: Date; id: string };
      /** Case-insensitive substring of the title; LIKE wildcards in it match literally. */
      titleContains?: string;
    },
    db: Executor = this.db,
  ): Promise<MeetingRow[]> {
    // L25: a track is shown as part of its meeting, not as a meeting of its own.
    let q = db
      .selectFrom('meetings')
      .selectAll()
      .where('workspace_id', '=', workspaceId)
      .where('parent_id', 'is', null);
    if (opts.status) q = q.where('status', '=', opts.status);
    if (opts.titleContains) {
      const pattern = `%${opts.titleContains.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
      q = q.where(sql<boolean>`title ilike ${pattern} escape '\\'`);
    }
    if (opts.before) {
      const { createdAt, id } = opts.before;
      q = q.where(sql<boolean>`(created_at, id) < (${createdAt}::timestamptz, ${id}::uuid)`);
    }
    return q.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(opts.limit).execute();
  }

  /**
   * Performs a named transition as a guarded UPDATE; zero rows means another writer moved the
   * meeting first, reported as a conflict. A meeting ends (complete, failed) only through
   * src/meetings/meeting-end.ts, which also does what its end sets off.
   */
  async transition(
    trx: Tx,
    meeting: MeetingRow,
    name: Exclude<MeetingTransition, EndTransition>,
    actor: string,
    reason: string | null,
    set: Updateable<MeetingsTable> = {},
  ): Promise<MeetingRow> {
    return this.applyTransition(trx, meeting, name, actor, reason, set);
  }

  /** The end of a meeting's row: for src/meetings/meeting-end.ts alone. */
  async endTransition(
    trx: Tx,
    meeting: MeetingRow,
    name: EndTransition,
    actor: string,
    reason: string | null,
    set: Updateable<MeetingsTable> = {},
  ): Promise<MeetingRow> {
    return this.applyTransition(trx, meeting, name, actor, reason, set);
  }

  private async applyTransition(
    trx: Tx,
    meeting: MeetingRow,
    name: MeetingTransition,
    actor: string,
    reason: string | null,
    set: Updateable<MeetingsTable>,
  ): Promise<MeetingRow> {
    const t = MeetingTransitions[name];
    const stamp = `${t.to === 'complete' ? 'completed' : t.to}_at` as const;
    const row = await trx
      .updateTable('meetings')
      .set({
        ...set,
        status: t.to,
        [stamp]: sql<Date>`now()`,
        revision: sql<number>`revision + 1`,
        updated_at: sql<Date>`now()`,
      })
      .where('id', '=', meeting.id)
      .where('status', 'in', t.from)
      .returningAll()
      .executeTakeFirst();
    if (!row) {
      throw new AppError(
        ErrorKind.conflict,
        'meeting.conflict',
        `meeting is ${meeting.status}; cannot ${name}`,
      );
    }
    await recordAudit(trx, {
      workspaceId: meeting.workspace_id,
      subjectType: 'meeting',
      subjectId: meeting.id,
      from: meeting.status,
      to: t.to,
      actor,
      reason,
    });
    return row;
  }

  /**
   * Settled windows come from the tallies a trigger keeps (window_tallies), so reading the counts
   * costs the same for a long meeting as for a short one (L21); only pending windows, few at any
   * time, are looked at one by one to split them into in flight and unworked.
   */
  async windowCounts(meetingId: string, db: Executor = this.db): Promise<WindowCounts> {
    const result = await sql<{
      total: number;
      transcribed: number;
      failed: number;
      missing: number;
      pending: number;
      in_flight: number;
      held: number;
      failed_kept: number;
    }>`
      select coalesce(t.total, 0)::int as total, coalesce(t.transcribed, 0)::int as transcribed,
             coalesce(t.failed, 0)::int as failed, coalesce(t.missing, 0)::int as missing,
             p.pending::int as pending, p.in_flight::int as in_flight, p.held::int as held,
             (select count(*) from windows f where f.meeting_id = ${meetingId}::uuid and ${failedWithAudioKept(sql`f`)})::int as failed_kept
        from (select count(*) as pending,
                     count(*) filter (where verbatim_window_in_flight(w.id)) as in_flight,
                     count(*) filter (where verbatim_window_held(w.id)) as held
                from windows w where w.meeting_id = ${meetingId}::uuid and w.status = 'pending') p
        left join window_tallies t on t.meeting_id = ${meetingId}::uuid`.execute(db);
    const r = result.rows[0]!;
    return {
      total: r.total,
      transcribed: r.transcribed,
      exhausted: r.failed,
      exhaustedAudioKept: r.failed_kept,
      missing: r.missing + (r.pending - r.in_flight - r.held),
      inFlight: r.in_flight,
      held: r.held,
    };
  }

  async segments(meetingId: string, db: Executor = this.db): Promise<TranscriptSegment[]> {
    const rows = await db
      .selectFrom('segments')
      .select(['start_ms', 'end_ms', 'text'])
      .where('meeting_id', '=', meetingId)
      .orderBy('start_ms')
      .orderBy('seq')
      .execute();
    return rows.map((r) => ({ startMs: r.start_ms, endMs: r.end_ms, text: r.text }));
  }
}

/**
 * J20: a failed window whose audio is held for it: it failed on the way (poison, an error), not for
 * want of audio, and its audio was not released (by an operator, or at the retention bound).
 */
export function failedWithAudioKept(w: RawBuilder<unknown>): RawBuilder<boolean> {
  return sql<boolean>`(${w}.status = 'failed' and ${w}.audio_released_at is null
    and coalesce(${w}.failure_code, '') not in ('audio.deleted', 'audio.missing'))`;
}

export function notFound(id: string): AppError {
  return new AppError(ErrorKind.notFound, ClientCode.meetingNotFound, `no meeting ${id} in this workspace`);
}

export { isUuid };
