import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { runAsTenant, withTenant } from '../db/tenant.ts';
import { AppError, ErrorKind } from '../domain/errors.ts';
import {
  createShareLink,
  listShareLinks,
  noteShareLinkOpened,
  openableShareLink,
  revokeShareLink,
} from '../meetings/share-link-store.ts';
import { transcriptLines } from '../meetings/transcript-read.ts';
import { hashSecret } from '../workspaces/sign-in.ts';
import { principalOf, workspaceOf, type ApiDeps } from './context.ts';
import { empty, ERRORS, ID_PARAMS, json, jsonBody, refusal, type RouteSchema } from './contract.ts';

/**
 * U5: share links. A meeting's owner (or an admin) makes a read-only link to the meeting for
 * someone outside the workspace: its token is shown once, stored as a hash, expires, and can be
 * revoked. Opening it reads that meeting — title, transcript, minutes — as a reader the meeting
 * policy lets see that one meeting and nothing else (verbatim.see_all = meeting:<id>); it reaches
 * no other route. Revoked, expired or unknown: 404, the same answer for each.
 */

const SHARE_PREFIX = 'vsh_';
const DAY_MS = 86_400_000;
const DEFAULT_DAYS = 7;
const MAX_DAYS = 365;

const LINK = {
  type: 'object',
  required: ['id', 'createdAt', 'expiresAt', 'revokedAt', 'opens', 'lastOpenedAt', 'createdBy'],
  properties: {
    id: { type: 'string', format: 'uuid' },
    createdAt: { type: 'string', format: 'date-time' },
    expiresAt: { type: 'string', format: 'date-time' },
    revokedAt: { type: ['string', 'null'], format: 'date-time' },
    opens: { type: 'integer' },
    lastOpenedAt: { type: ['string', 'null'], format: 'date-time' },
    createdBy: { type: ['string', 'null'], format: 'uuid' },
  },
};
const LINK_PARAMS = {
  type: 'object',
  required: ['id', 'linkId'],
  properties: { id: { type: 'string', format: 'uuid' }, linkId: { type: 'string', format: 'uuid' } },
};

const CREATE_SCHEMA: RouteSchema = {
  summary:
    'U5: a read-only link to this meeting for someone outside the workspace (its owner or an admin). The token and the web app’s path to open it (`/#/s/<token>`) are shown this once; the link expires (default 7 days, at most 365) and can be revoked',
  params: ID_PARAMS,
  body: jsonBody(
    {
      type: 'object',
      properties: {
        expiresInDays: { type: 'number', description: 'days until it stops working (0.01–365)' },
      },
    },
    false,
  ),
  response: {
    201: json('The link', {
      type: 'object',
      required: ['link', 'token', 'path'],
      properties: { link: LINK, token: { type: 'string' }, path: { type: 'string' } },
    }),
    ...ERRORS,
  },
};
const LIST_SCHEMA: RouteSchema = {
  summary:
    'U5: this meeting’s share links, newest first, with how often each was opened (tokens are not shown)',
  params: ID_PARAMS,
  response: {
    200: json('{links: [...]}', {
      type: 'object',
      required: ['links'],
      properties: { links: { type: 'array', items: LINK } },
    }),
    ...ERRORS,
  },
};
const REVOKE_SCHEMA: RouteSchema = {
  summary: 'U5: revoke a share link: it answers 404 from now on',
  params: LINK_PARAMS,
  response: { 204: empty('Revoked'), ...ERRORS },
};
const OPEN_SCHEMA: RouteSchema = {
  summary:
    'U5: what a share link shows, read-only: the meeting’s title, status, date, transcript and minutes. No key or session: the token is the grant. Revoked, expired or unknown: 404 share.not_found',
  params: { type: 'object', required: ['token'], properties: { token: { type: 'string' } } },
  response: {
    200: json('The shared meeting', {
      type: 'object',
      required: ['meeting', 'transcript', 'minutes', 'expiresAt'],
      properties: {
        meeting: {
          type: 'object',
          required: ['title', 'status', 'createdAt', 'durationMs'],
          properties: {
            title: { type: 'string' },
            status: { type: 'string' },
            createdAt: { type: 'string', format: 'date-time' },
            durationMs: { type: ['integer', 'null'] },
          },
        },
        transcript: {
          type: 'object',
          required: ['complete', 'segments'],
          properties: {
            complete: { type: 'boolean' },
            segments: {
              type: 'array',
              items: {
                type: 'object',
                required: ['startMs', 'endMs', 'text', 'speaker'],
                properties: {
                  startMs: { type: 'integer' },
                  endMs: { type: 'integer' },
                  text: { type: 'string' },
                  speaker: { type: ['string', 'null'] },
                },
              },
            },
          },
        },
        minutes: {},
        expiresAt: { type: 'string', format: 'date-time' },
      },
    }),
    404: refusal('No such link, or revoked or expired'),
    429: refusal('Too many requests from this address'),
  },
};

function daysOf(body: unknown): number {
  const given = (body as { expiresInDays?: unknown } | undefined)?.expiresInDays;
  if (given === undefined) return DEFAULT_DAYS;
  if (typeof given !== 'number' || !Number.isFinite(given) || given < 0.01 || given > MAX_DAYS) {
    throw new AppError(
      ErrorKind.invalidInput,
      'share.expires_in_days',
      `expiresInDays must be a number from 0.01 to ${MAX_DAYS}`,
    );
  }
  return given;
}

const notFound = () =>
  new AppError(ErrorKind.notFound, 'share.not_found', 'this link is unknown, revoked or expired');

export function registerShareRoutes(app: FastifyInstance, api: ApiDeps): void {
  const { deps } = api;

  app.post<{ Params: { id: string } }>(
    '/v1/meetings/:id/share-links',
    { schema: CREATE_SCHEMA },
    async (req, reply) => {
      const workspaceId = workspaceOf(req);
      const days = daysOf(req.body);
      const token = `${SHARE_PREFIX}${randomBytes(32).toString('base64url')}`;
      const link = await withTenant(deps.db, workspaceId, async (trx) => {
        // The meeting must be one the caller reads (else 404, as every meeting route answers).
        const meeting = await deps.meetings.get(workspaceId, req.params.id, trx);
        return createShareLink(trx, {
          workspaceId,
          meetingId: meeting.id,
          tokenHash: hashSecret(token),
          createdBy: principalOf(req).userId,
          ttlMs: Math.round(days * DAY_MS),
        });
      });
      api.log.info(
        { event: 'share.link_made', meetingId: req.params.id, linkId: link.id, by: principalOf(req).userId },
        'share link made',
      );
      return reply.status(201).send({ link, token, path: `/#/s/${token}` });
    },
  );

  app.get<{ Params: { id: string } }>(
    '/v1/meetings/:id/share-links',
    { schema: LIST_SCHEMA },
    async (req) => {
      const workspaceId = workspaceOf(req);
      return withTenant(deps.db, workspaceId, async (trx) => {
        const meeting = await deps.meetings.get(workspaceId, req.params.id, trx);
        return { links: await listShareLinks(trx, workspaceId, meeting.id) };
      });
    },
  );

  app.delete<{ Params: { id: string; linkId: string } }>(
    '/v1/meetings/:id/share-links/:linkId',
    { schema: REVOKE_SCHEMA },
    async (req, reply) => {
      const workspaceId = workspaceOf(req);
      const revoked = await withTenant(deps.db, workspaceId, async (trx) => {
        const meeting = await deps.meetings.get(workspaceId, req.params.id, trx);
        return revokeShareLink(trx, workspaceId, meeting.id, req.params.linkId);
      });
      if (!revoked)
        throw new AppError(ErrorKind.notFound, 'share.not_found', 'this meeting has no such link');
      api.log.info(
        { event: 'share.link_revoked', meetingId: req.params.id, linkId: req.params.linkId },
        'share link revoked',
      );
      return reply.status(204).send();
    },
  );

  app.get<{ Params: { token: string } }>('/v1/shared/:token', { schema: OPEN_SCHEMA }, async (req) => {
    const token = req.params.token;
    if (!token.startsWith(SHARE_PREFIX) || token.length > 100) throw notFound();
    const link = await openableShareLink(deps.db, hashSecret(token));
    if (!link) throw notFound();
    const shown = await runAsTenant(
      link.workspaceId,
      () =>
        withTenant(deps.db, link.workspaceId, async (trx) => {
          const meeting = await deps.meetings
            .get(link.workspaceId, link.meetingId, trx)
            .catch((err: unknown) => {
              // Deleted since, or (the policy's word) not this link's to show.
              if (err instanceof AppError && err.kind === ErrorKind.notFound) throw notFound();
              throw err;
            });
          const segments = await transcriptLines(trx, meeting.id);
          const expiresAt = await noteShareLinkOpened(trx, link.id);
          return {
            meeting: {
              title: meeting.title,
              status: meeting.status,
              createdAt: meeting.created_at.toISOString(),
              durationMs: meeting.duration_ms,
            },
            transcript: {
              complete: meeting.transcript_completed_at !== null,
              segments: segments.map((s) => ({
                startMs: s.startMs,
                endMs: s.endMs,
                text: s.text,
                speaker: s.speaker?.name ?? null,
              })),
            },
            minutes: meeting.minutes ?? null,
            expiresAt: expiresAt.toISOString(),
          };
        }),
      { userId: null, seeAll: false, onlyMeeting: link.meetingId },
    );
    api.log.info({ event: 'share.link_opened', linkId: link.id, address: req.ip }, 'share link opened');
    await api.people.audit([
      {
        workspaceId: link.workspaceId,
        action: 'share.link_opened',
        actor: { kind: 'share_link' },
        subject: { type: 'share_link', id: link.id },
        address: req.ip || null,
        detail: { meetingId: link.meetingId },
      },
    ]);
    return shown;
  });
}
