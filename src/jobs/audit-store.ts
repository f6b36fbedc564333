import type { Executor } from '../db/schema.ts';

export interface AuditEntry {
  workspaceId: string | null;
  subjectType: 'meeting' | 'window' | 'job' | 'attempt' | 'outbox' | 'worker' | 'bot_recording';
  subjectId: string;
  from: string | null;
  to: string;
  /** `worker:<id>`, `user:<workspace>`, `sweep:<worker id>`, `api`. */
  actor: string;
  reason?: string | null;
  details?: Record<string, unknown>;
}

const buffers = new WeakMap<object, AuditEntry[]>();

/**
 * Collects the audit rows a transaction records and writes them in one statement at its end, still
 * inside it: a busy transaction (a window commit records three transitions) pays one round trip.
 */
export async function withAuditBuffer<T>(trx: Executor, fn: () => Promise<T>): Promise<T> {
  const buffer: AuditEntry[] = [];
  buffers.set(trx, buffer);
  try {
    const result = await fn();
    await insertAudit(trx, buffer);
    return result;
  } finally {
    buffers.delete(trx);
  }
}

/** Writes what a transaction's buffer holds so far (before a SQL function records later moves). */
export async function flushAudit(trx: Executor): Promise<void> {
  const buffer = buffers.get(trx);
  if (!buffer || buffer.length === 0) return;
  await insertAudit(trx, buffer.splice(0));
}

/** J17: every state transition records from, to, actor, reason and time, in the transition's transaction. */
export async function recordAudit(db: Executor, entries: AuditEntry | AuditEntry[]): Promise<void> {
  const list = Array.isArray(entries) ? entries : [entries];
  const buffer = buffers.get(db);
  if (buffer) {
    buffer.push(...list);
    return;
  }
  await insertAudit(db, list);
}

async function insertAudit(db: Executor, list: AuditEntry[]): Promise<void> {
  if (list.length === 0) return;
  await db
    .insertInto('audit_events')
    .values(
      list.map((e) => ({
        workspace_id: e.workspaceId,
        subject_type: e.subjectType,
        subject_id: e.subjectId,
        from_status: e.from,
        to_status: e.to,
        actor: e.actor,
        reason: e.reason ?? null,
        details: e.details ? JSON.stringify(e.details) : null,
      })),
    )
    .execute();
}
