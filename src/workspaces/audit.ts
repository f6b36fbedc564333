import type { Db } from '../db/schema.ts';
import type { Logger } from '../log.ts';
import { insertAudit, type AuditEntry } from './audit-store.ts';
import type { Principal } from './sign-in.ts';

/**
 * U8: recording the audit trail. A record is written after the thing it tells of, on its own: a
 * database that fails the write is logged (the event's name and workspace, never its secrets),
 * and does not undo what was done.
 */

export async function recordAudit(db: Db, log: Logger, entries: AuditEntry[]): Promise<void> {
  try {
    await insertAudit(db, entries);
  } catch (err) {
    log.warn(
      { err: String(err), actions: entries.map((e) => e.action), workspaceId: entries[0]?.workspaceId },
      'audit trail: a record could not be written',
    );
  }
}

/** Who a request acted as, for the trail. */
export function actorOf(principal: Principal): AuditEntry['actor'] {
  if (principal.via === 'session') return { kind: 'person', userId: principal.userId };
  if (principal.userId === null) return { kind: 'service', keyId: principal.keyId };
  return { kind: 'key', userId: principal.userId, keyId: principal.keyId };
}
