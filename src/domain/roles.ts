/**
 * U1/U6: who may do what in a workspace. One table, role × action → allowed, read by the API's
 * one authorization hook (src/api/authorize.ts); no handler decides it. A request acts as a person
 * (a session, or a key of theirs) or as a service account (a key of no person); a key narrows what
 * its holder's role allows to its scopes.
 */

export const Role = {
  owner: 'owner',
  admin: 'admin',
  member: 'member',
  viewer: 'viewer',
} as const;
export type Role = (typeof Role)[keyof typeof Role];
export const ROLES: readonly Role[] = [Role.owner, Role.admin, Role.member, Role.viewer];

export const Action = {
  /** List and read meetings, transcripts, exports, search, ask, streams, speakers, batches. */
  readMeetings: 'meetings.read',
  /** Read every meeting of the workspace, private ones included (else: one's own, shared, workspace). */
  readAllMeetings: 'meetings.read_all',
  /** Record, upload, send chunks, end, start batches and bots, request minutes of one's meetings. */
  createMeetings: 'meetings.create',
  /** Rename speakers, resubmit, delete: one's own meetings. */
  manageOwnMeetings: 'meetings.manage_own',
  /** The same on every meeting of the workspace. */
  manageAllMeetings: 'meetings.manage_all',
  /** Webhooks, calendar feeds, bot settings, vocabulary. */
  manageWorkspace: 'workspace.manage',
  /** The queue and failure figures of the operator page. */
  readOperations: 'operations.read',
  /** One's own API keys. */
  manageOwnKeys: 'keys.manage_own',
  /** Every key of the workspace (list and revoke). */
  manageAllKeys: 'keys.manage_all',
  /** Invite, remove and change the role of members and viewers. */
  manageMembers: 'members.manage',
  /** Make, demote and remove admins and owners. */
  manageAdmins: 'members.manage_admins',
  /** The workspace's audit trail. */
  readAudit: 'audit.read',
} as const;
export type Action = (typeof Action)[keyof typeof Action];
export const ACTIONS: readonly Action[] = Object.values(Action);

const A = Action;
/** The table. A row per role, every action named (the type makes a missing one an error). */
export const ROLE_TABLE: Readonly<Record<Role, Readonly<Record<Action, boolean>>>> = {
  owner: {
    [A.readMeetings]: true,
    [A.readAllMeetings]: true,
    [A.createMeetings]: true,
    [A.manageOwnMeetings]: true,
    [A.manageAllMeetings]: true,
    [A.manageWorkspace]: true,
    [A.readOperations]: true,
    [A.manageOwnKeys]: true,
    [A.manageAllKeys]: true,
    [A.manageMembers]: true,
    [A.manageAdmins]: true,
    [A.readAudit]: true,
  },
  admin: {
    [A.readMeetings]: true,
    [A.readAllMeetings]: true,
    [A.createMeetings]: true,
    [A.manageOwnMeetings]: true,
    [A.manageAllMeetings]: true,
    [A.manageWorkspace]: true,
    [A.readOperations]: true,
    [A.manageOwnKeys]: true,
    [A.manageAllKeys]: true,
    [A.manageMembers]: true,
    [A.manageAdmins]: false,
    [A.readAudit]: true,
  },
  member: {
    [A.readMeetings]: true,
    [A.readAllMeetings]: false,
    [A.createMeetings]: true,
    [A.manageOwnMeetings]: true,
    [A.manageAllMeetings]: false,
    [A.manageWorkspace]: false,
    [A.readOperations]: false,
    [A.manageOwnKeys]: true,
    [A.manageAllKeys]: false,
    [A.manageMembers]: false,
    [A.manageAdmins]: false,
    [A.readAudit]: false,
  },
  viewer: {
    [A.readMeetings]: true,
    [A.readAllMeetings]: false,
    [A.createMeetings]: false,
    [A.manageOwnMeetings]: false,
    [A.manageAllMeetings]: false,
    [A.manageWorkspace]: false,
    [A.readOperations]: false,
    [A.manageOwnKeys]: false,
    [A.manageAllKeys]: false,
    [A.manageMembers]: false,
    [A.manageAdmins]: false,
    [A.readAudit]: false,
  },
};

/** U6: what an API key may be used for, whatever its holder's role allows beyond it. */
export const Scope = { read: 'read', write: 'write', admin: 'admin', keys: 'keys' } as const;
export type Scope = (typeof Scope)[keyof typeof Scope];
export const SCOPES: readonly Scope[] = [Scope.read, Scope.write, Scope.admin, Scope.keys];

/** Which scope an action needs. */
export const SCOPE_OF: Readonly<Record<Action, Scope>> = {
  [A.readMeetings]: Scope.read,
  [A.readAllMeetings]: Scope.read,
  [A.createMeetings]: Scope.write,
  [A.manageOwnMeetings]: Scope.write,
  [A.manageAllMeetings]: Scope.write,
  [A.manageWorkspace]: Scope.admin,
  [A.readOperations]: Scope.admin,
  [A.manageOwnKeys]: Scope.keys,
  [A.manageAllKeys]: Scope.keys,
  [A.manageMembers]: Scope.admin,
  [A.manageAdmins]: Scope.admin,
  [A.readAudit]: Scope.admin,
};

/** Who a request acts as, as far as the table cares. `scopes` null: a session (every scope). */
export interface Grant {
  role: Role;
  scopes: readonly Scope[] | null;
}

export type Decision = { allowed: true } | { allowed: false; because: string };

/** U1/U6: the one answer to "may this request do that". */
export function decide(grant: Grant, action: Action): Decision {
  if (!ROLE_TABLE[grant.role][action]) {
    return { allowed: false, because: `the ${grant.role} role may not ${action}` };
  }
  const scope = SCOPE_OF[action];
  if (grant.scopes !== null && !grant.scopes.includes(scope)) {
    return { allowed: false, because: `this key lacks the ${scope} scope ${action} needs` };
  }
  return { allowed: true };
}

export function isRole(value: unknown): value is Role {
  return typeof value === 'string' && (ROLES as readonly string[]).includes(value);
}

export function isScope(value: unknown): value is Scope {
  return typeof value === 'string' && (SCOPES as readonly string[]).includes(value);
}

/** The roles a grant may hand out or take away: admins manage members and viewers only. */
export function mayAssign(grant: Grant, role: Role): boolean {
  const needs = role === Role.owner || role === Role.admin ? Action.manageAdmins : Action.manageMembers;
  return decide(grant, needs).allowed;
}

/**
 * U6: a key made by a key or a session: its scopes are at most its maker's, and it expires no later
 * than its maker does. Returns what the new key gets, or why it cannot be made.
 */
export function boundNewKey(
  maker: { scopes: readonly Scope[] | null; expiresAt: Date | null },
  asked: { scopes: readonly Scope[] | null; expiresAt: Date | null },
): { ok: true; scopes: Scope[]; expiresAt: Date | null } | { ok: false; code: string; message: string } {
  const makerScopes = maker.scopes ?? SCOPES;
  const scopes = [...(asked.scopes ?? makerScopes)];
  const beyond = scopes.filter((s) => !makerScopes.includes(s));
  if (beyond.length > 0) {
    return {
      ok: false,
      code: 'api_key.scopes',
      message: `a key cannot have scopes its maker lacks: ${beyond.join(', ')}`,
    };
  }
  if (maker.expiresAt === null) return { ok: true, scopes, expiresAt: asked.expiresAt };
  if (asked.expiresAt !== null && asked.expiresAt.getTime() > maker.expiresAt.getTime()) {
    return {
      ok: false,
      code: 'api_key.expires_at',
      message: `expiresAt must be no later than the key or session making it (${maker.expiresAt.toISOString()})`,
    };
  }
  return { ok: true, scopes, expiresAt: asked.expiresAt ?? maker.expiresAt };
}

/** U4: who may read a meeting. */
export const VISIBILITIES = ['private', 'workspace', 'shared'] as const;
export type Visibility = (typeof VISIBILITIES)[number];

export function isVisibility(value: unknown): value is Visibility {
  return typeof value === 'string' && (VISIBILITIES as readonly string[]).includes(value);
}
