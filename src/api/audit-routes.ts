import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError, ErrorKind } from '../domain/errors.ts';
import { listAudit, type AuditEntry } from '../workspaces/audit-store.ts';
import { actorOf } from '../workspaces/audit.ts';
import { workspaceOf, type ApiDeps } from './context.ts';
import { ERRORS, json, refusal, type RouteSchema } from './contract.ts';

/**
 * U8: the audit trail through the API. What a request did is recorded after it succeeded, by one
 * hook, from this table of the routes that change who may do what or let something out: role
 * changes, removals, invites, access and share links, exports, deletions and keys. Sign-ins and
 * their failures, sign-outs everywhere and share-link opens are recorded where they happen (they
 * have no principal yet, or none at all). Admins and owners read the trail: GET /v1/audit.
 */

type Params = Record<string, string>;
interface Audited {
  action: string;
  subject: (
    p: Params,
    body: Record<string, unknown>,
    req: FastifyRequest,
  ) => { type: string; id: string } | null;
  detail?: (p: Params, body: Record<string, unknown>, req: FastifyRequest) => Record<string, unknown>;
  /** Whether this request is one to record (default: every successful one). */
  when?: (req: FastifyRequest) => boolean;
}

/** Where a URL points (its host only: a feed's path may carry its secret). */
function hostOf(url: unknown): string | null {
  try {
    return typeof url === 'string' ? new URL(url).host : null;
  } catch {
    return null;
  }
}

const EXPORT_FORMATS = new Set(['txt', 'vtt', 'srt', 'md', 'docx']);
const meeting = (p: Params) => ({ type: 'meeting', id: p.id! });

/** The routes recorded, by method and path as registered. */
export const AUDITED_ROUTES: Readonly<Record<string, Audited>> = {
  'PATCH /v1/members/:userId': {
    action: 'member.role_changed',
    subject: (p) => ({ type: 'user', id: p.userId! }),
    detail: (_p, body) => ({ role: body.role }),
  },
  'DELETE /v1/members/:userId': {
    action: 'member.removed',
    subject: (p) => ({ type: 'user', id: p.userId! }),
  },
  'POST /v1/invites': {
    action: 'invite.created',
    subject: () => null,
    detail: (_p, body) => ({ role: body.role }),
  },
  'PUT /v1/meetings/:id/access': {
    action: 'meeting.access_changed',
    subject: meeting,
    detail: (_p, body) => ({
      visibility: body.visibility,
      sharedWith: Array.isArray(body.sharedWith) ? body.sharedWith.length : 0,
    }),
  },
  'POST /v1/meetings/:id/share-links': { action: 'share.link_made', subject: meeting },
  'DELETE /v1/meetings/:id/share-links/:linkId': {
    action: 'share.link_revoked',
    subject: (p) => ({ type: 'share_link', id: p.linkId! }),
    detail: (p) => ({ meetingId: p.id }),
  },
  'GET /v1/meetings/:id/transcript': {
    action: 'meeting.exported',
    subject: meeting,
    detail: (_p, _b, req) => ({ format: (req.query as { format?: string }).format }),
    when: (req) => EXPORT_FORMATS.has((req.query as { format?: string }).format ?? 'json'),
  },
  'DELETE /v1/meetings/:id': { action: 'meeting.deleted', subject: meeting },
  'PATCH /v1/meetings/:id': { action: 'meeting.renamed', subject: meeting },
  'POST /v1/meetings/:id/corrections': {
    action: 'transcript.corrected',
    subject: meeting,
    detail: (_p, body) => ({ startMs: body.startMs }),
  },
  'DELETE /v1/meetings/:id/corrections/:correctionId': {
    action: 'transcript.correction_removed',
    subject: meeting,
    detail: (p) => ({ correctionId: p.correctionId }),
  },
  'POST /v1/api-keys': { action: 'key.created', subject: () => null },
  'POST /v1/webhooks': {
    action: 'webhook.created',
    subject: () => null,
    detail: (_p, body) => ({ host: hostOf(body.url) }),
  },
  'DELETE /v1/webhooks/:id': { action: 'webhook.disabled', subject: (p) => ({ type: 'webhook', id: p.id! }) },
  'PUT /v1/bot-settings': { action: 'bots.settings_changed', subject: () => null },
  'PUT /v1/playback-settings': {
    action: 'playback.settings_changed',
    subject: () => null,
    detail: (_p, body) => ({ days: body.days }),
  },
  'POST /v1/calendar-feeds': {
    action: 'calendar_feed.added',
    subject: () => null,
    detail: (_p, body) => ({ host: hostOf(body.url) }),
  },
  'DELETE /v1/calendar-feeds/:id': {
    action: 'calendar_feed.removed',
    subject: (p) => ({ type: 'calendar_feed', id: p.id! }),
  },
  'POST /v1/webhooks/:id/rotate-secret': {
    action: 'webhook.secret_rotated',
    subject: (p) => ({ type: 'webhook', id: p.id! }),
  },
  'DELETE /v1/api-keys/:id': { action: 'key.revoked', subject: (p) => ({ type: 'api_key', id: p.id! }) },
  'POST /v1/api-keys/:id/revoke': { action: 'key.revoked', subject: (p) => ({ type: 'api_key', id: p.id! }) },
};

/** The hook: a successful request of an audited route is recorded (after its answer is sent). */
export async function auditRequest(api: ApiDeps, req: FastifyRequest, reply: FastifyReply): Promise<void> {
  const route = req.routeOptions.url;
  if (!route || reply.statusCode >= 400 || !req.principal) return;
  const audited = AUDITED_ROUTES[`${req.method === 'HEAD' ? 'GET' : req.method} ${route}`];
  if (!audited || (audited.when && !audited.when(req))) return;
  const params = (req.params ?? {}) as Params;
  const body = (req.body && typeof req.body === 'object' ? req.body : {}) as Record<string, unknown>;
  const entry: AuditEntry = {
    workspaceId: req.principal.workspaceId,
    action: audited.action,
    actor: actorOf(req.principal),
    subject: audited.subject(params, body, req),
    address: req.ip || null,
    detail: audited.detail?.(params, body, req) ?? {},
  };
  await api.people.audit([entry]);
}

const AUDIT_EVENT = {
  type: 'object',
  required: ['id', 'at', 'action', 'actor', 'subject', 'address', 'detail'],
  properties: {
    id: { type: 'string' },
    at: { type: 'string', format: 'date-time' },
    action: { type: 'string' },
    actor: {
      type: 'object',
      required: ['kind', 'userId', 'keyId', 'label'],
      properties: {
        kind: { type: 'string', enum: ['person', 'key', 'service', 'share_link', 'anonymous'] },
        userId: { type: ['string', 'null'] },
        keyId: { type: ['string', 'null'] },
        label: { type: ['string', 'null'] },
      },
    },
    subject: {
      anyOf: [
        { type: 'null' },
        {
          type: 'object',
          required: ['type', 'id'],
          properties: { type: { type: 'string' }, id: { type: 'string' } },
        },
      ],
    },
    address: { type: ['string', 'null'] },
    detail: {},
  },
};
const AUDIT_SCHEMA: RouteSchema = {
  summary:
    'U8: the workspace’s audit trail, newest first: sign-ins and failures, role changes and removals, invites, access changes and share links (made, opened, revoked), exports, deletions and key changes — who, what, when, from which address. Admins and owners',
  querystring: {
    type: 'object',
    properties: {
      limit: { type: 'string', description: '1–500 (default 100)' },
      before: { type: 'string', description: 'the `next` of the previous page' },
      action: { type: 'string', description: 'only actions starting with this, e.g. `auth.` or `share.`' },
    },
  },
  response: {
    200: json('{events: [...], next}', {
      type: 'object',
      required: ['events', 'next'],
      properties: { events: { type: 'array', items: AUDIT_EVENT }, next: { type: ['string', 'null'] } },
    }),
    ...ERRORS,
    403: refusal('Not an admin or owner (auth.forbidden)'),
  },
};

export function registerAuditRoutes(app: FastifyInstance, api: ApiDeps): void {
  app.get<{ Querystring: { limit?: string; before?: string; action?: string } }>(
    '/v1/audit',
    { schema: AUDIT_SCHEMA },
    async (req) => {
      const limit = req.query.limit === undefined ? 100 : Number(req.query.limit);
      if (!Number.isInteger(limit) || limit < 1 || limit > 500)
        throw new AppError(
          ErrorKind.invalidInput,
          'audit.limit',
          'limit must be a whole number from 1 to 500',
        );
      const before = req.query.before ?? null;
      if (before !== null && !/^[1-9][0-9]{0,17}$/.test(before))
        throw new AppError(
          ErrorKind.invalidInput,
          'audit.before',
          'before must be the `next` of a previous page',
        );
      const action = req.query.action ?? null;
      if (action !== null && (action.length > 100 || !/^[a-z_.]*$/.test(action)))
        throw new AppError(ErrorKind.invalidInput, 'audit.action', 'action must be a prefix such as `auth.`');
      const events = await listAudit(api.deps.db, { workspaceId: workspaceOf(req), before, limit, action });
      return { events, next: events.length === limit ? events.at(-1)!.id : null };
    },
  );
}
