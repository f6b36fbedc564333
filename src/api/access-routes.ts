import type { FastifyInstance } from 'fastify';
import { withTenant } from '../db/tenant.ts';
import { AppError, ErrorKind } from '../domain/errors.ts';
import { isUuid } from '../domain/ids.ts';
import { isVisibility } from '../domain/roles.ts';
import { workspaceOf, type ApiDeps } from './context.ts';
import { ERRORS, ID_PARAMS, json, jsonBody, type RouteSchema } from './contract.ts';
import { MeetingAccessSchema } from './schemas.ts';

const ACCESS_SCHEMA: RouteSchema = {
  summary:
    'U4: who may read this meeting: private (its owner, admins and owners), workspace (every member) or shared (its owner, admins, and the members in `sharedWith`). Its owner or an admin',
  params: ID_PARAMS,
  body: jsonBody({
    type: 'object',
    required: ['visibility'],
    properties: {
      visibility: { type: 'string', enum: ['private', 'workspace', 'shared'] },
      sharedWith: {
        type: 'array',
        items: { type: 'string', format: 'uuid' },
        description: 'member user ids (with `shared`; replaces the list)',
      },
    },
  }),
  response: { 200: json('The meeting’s access', MeetingAccessSchema), ...ERRORS },
};
const READ_SCHEMA: RouteSchema = {
  summary: 'U4: who may read this meeting',
  params: ID_PARAMS,
  response: { 200: json('The meeting’s access', MeetingAccessSchema), ...ERRORS },
};

function invalid(code: string, message: string): AppError {
  return new AppError(ErrorKind.invalidInput, code, message);
}

/** U4: a meeting's visibility and the members it is shared with. */
export function registerAccessRoutes(app: FastifyInstance, api: ApiDeps): void {
  const { deps } = api;

  app.get<{ Params: { id: string } }>('/v1/meetings/:id/access', { schema: READ_SCHEMA }, async (req) => {
    const workspaceId = workspaceOf(req);
    return withTenant(deps.db, workspaceId, (trx) => deps.meetings.access(trx, workspaceId, req.params.id));
  });

  app.put<{ Params: { id: string } }>('/v1/meetings/:id/access', { schema: ACCESS_SCHEMA }, async (req) => {
    const workspaceId = workspaceOf(req);
    const body = (req.body ?? {}) as { visibility?: unknown; sharedWith?: unknown };
    const visibility = body.visibility;
    if (!isVisibility(visibility)) {
      throw invalid('meeting.visibility', 'visibility must be "private", "workspace" or "shared"');
    }
    const given: unknown = body.sharedWith ?? [];
    if (!Array.isArray(given) || !given.every((u): u is string => typeof u === 'string' && isUuid(u))) {
      throw invalid('meeting.shared_with', 'sharedWith must be a list of member user ids');
    }
    const sharedWith: string[] = [...new Set(given.map((u) => u.toLowerCase()))];
    if (visibility !== 'shared' && sharedWith.length > 0) {
      throw invalid('meeting.shared_with', 'sharedWith goes with visibility "shared"');
    }
    return withTenant(deps.db, workspaceId, async (trx) => {
      const members = await api.people.people.listMembers(workspaceId, trx);
      const unknown = sharedWith.filter((u) => !members.some((m) => m.userId === u));
      if (unknown.length > 0) {
        throw invalid('meeting.shared_with', `not members of this workspace: ${unknown.join(', ')}`);
      }
      await deps.meetings.setAccess(trx, workspaceId, req.params.id, visibility, sharedWith);
      api.log.info(
        { event: 'meeting.access_changed', meetingId: req.params.id, visibility, shares: sharedWith.length },
        'meeting access changed',
      );
      return deps.meetings.access(trx, workspaceId, req.params.id);
    });
  });
}
