import type { FastifyRequest } from 'fastify';
import { AppError, ErrorKind } from '../domain/errors.ts';
import type { Logger } from '../log.ts';
import type { MeetingDeps } from '../meetings/deps.ts';
import type { PgWorkspaceStore } from '../workspaces/pg-workspace-store.ts';
import type { PeopleDeps, Principal } from '../workspaces/sign-in.ts';

/**
 * What every route module receives, and the authenticated workspace of a request. Route modules
 * import this file, never server.ts, so the server that registers them is not in a cycle with them.
 */
export interface ApiDeps {
  deps: MeetingDeps;
  workspaces: PgWorkspaceStore;
  people: PeopleDeps;
  log: Logger;
  /** The built web app to serve at `/` (default: dist/web). */
  webRoot?: string;
  /** For the LISTEN connection of live streams (L23); without it streams only poll. */
  connectionString?: string;
}

declare module 'fastify' {
  interface FastifyRequest {
    workspaceId: string;
    /** Who the request acts as (src/api/authorize.ts); null before authentication. */
    principal: Principal | null;
  }
}

/** U1: who an authenticated request acts as. */
export function principalOf(req: FastifyRequest): Principal {
  if (!req.principal) {
    throw new AppError(ErrorKind.unauthorized, 'auth.invalid_key', 'missing or invalid API key');
  }
  return req.principal;
}

export function workspaceOf(req: FastifyRequest): string {
  if (!req.workspaceId) {
    throw new AppError(ErrorKind.unauthorized, 'auth.invalid_key', 'missing or invalid API key');
  }
  return req.workspaceId;
}
