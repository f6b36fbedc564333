import { sql } from 'kysely';
import type { Executor } from '../db/schema.ts';

/**
 * U8: the rows of the audit trail (migration 0043). Writes what src/workspaces/audit.ts and the
 * API's audit hook decide to record; reads a workspace's trail newest first.
 */

export type AuditActorKind = 'person' | 'key' | 'service' | 'share_link' | 'anonymous';

export interface AuditEntry {
  workspaceId: string | null;
  action: string;
  actor: { kind: AuditActorKind; userId?: string | null; keyId?: string | null; label?: string | null };
  subject?: { type: string; id: string } | null;
  address?: string | null;
  detail?: Record<string, unknown>;
}

export interface AuditView {
  id: string;
  at: string;
  action: string;
  actor: { kind: string; userId: string | null; keyId: string | null; label: string | null };
  subject: { type: string; id: string } | null;
  address: string | null;
  detail: unknown;
}

export async function insertAudit(db: Executor, entries: AuditEntry[]): Promise<void> {
  if (entries.length === 0) return;
  await db
    .insertInto('audit_trail')
    .values(
      entries.map((e) => ({
        workspace_id: e.workspaceId,
        action: e.action,
        actor_kind: e.actor.kind,
        actor_user_id: e.actor.userId ?? null,
        actor_key_id: e.actor.keyId ?? null,
        actor_label: e.actor.label ?? null,
        subject_type: e.subject?.type ?? null,
        subject_id: e.subject?.id ?? null,
        address: e.address ?? null,
        detail: JSON.stringify(e.detail ?? {}),
      })),
    )
    .execute();
}

/**
 * A workspace's trail (null: the rows of no workspace, for the operator), newest first, before the
 * id `before`, optionally only actions starting with `action`. A person's label is their email
 * now when the row did not keep one.
 */
export async function listAudit(
  db: Executor,
  query: { workspaceId: string | null; before: string | null; limit: number; action: string | null },
): Promise<AuditView[]> {
  let q = db
    .selectFrom('audit_trail as a')
    .leftJoin('users as u', 'u.id', 'a.actor_user_id')
    .select([
      'a.id',
      'a.at',
      'a.action',
      'a.actor_kind',
      'a.actor_user_id',
      'a.actor_key_id',
      'a.actor_label',
      'u.email',
      'a.subject_type',
      'a.subject_id',
      'a.address',
      'a.detail',
    ])
    .orderBy('a.id', 'desc')
    .limit(query.limit);
  q =
    query.workspaceId === null
      ? q.where('a.workspace_id', 'is', null)
      : q.where('a.workspace_id', '=', query.workspaceId);
  if (query.before !== null) q = q.where('a.id', '<', query.before);
  if (query.action !== null)
    q = q.where('a.action', 'like', sql<string>`${query.action.replace(/[\\%_]/g, '\\$&')} || '%'`);
  const rows = await q.execute();
  return rows.map((r) => ({
    id: String(r.id),
    at: r.at.toISOString(),
    action: r.action,
    actor: {
      kind: r.actor_kind,
      userId: r.actor_user_id,
      keyId: r.actor_key_id,
      label: r.actor_label ?? r.email ?? null,
    },
    subject: r.subject_type && r.subject_id ? { type: r.subject_type, id: r.subject_id } : null,
    address: r.address,
    detail: r.detail,
  }));
}
