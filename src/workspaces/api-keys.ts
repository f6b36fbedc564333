import { AppError, ErrorKind } from '../domain/errors.ts';
import { isScope, SCOPES, type Scope } from '../domain/roles.ts';

/** What a key is now, derived from its timestamps (nothing stores it). */
export const ApiKeyStatus = {
  active: 'active',
  expired: 'expired',
  revoked: 'revoked',
} as const;
export type ApiKeyStatus = (typeof ApiKeyStatus)[keyof typeof ApiKeyStatus];

export interface ApiKeyRecord {
  id: string;
  workspace_id: string;
  name: string;
  prefix: string;
  created_at: Date;
  last_used_at: Date | null;
  expires_at: Date | null;
  revoked_at: Date | null;
  user_id: string | null;
  scopes: string[];
}

/** S9: a key as listed. Never the secret nor its hash: `hint` is the public lookup part only. */
export interface ApiKeyView {
  id: string;
  workspaceId: string;
  name: string;
  hint: string;
  status: ApiKeyStatus;
  createdAt: string;
  lastUsedAt: string | null;
  expiresAt: string | null;
  revokedAt: string | null;
  /** U6: the person it acts for; null for a service account. */
  userId: string | null;
  scopes: string[];
}

export function apiKeyStatus(key: Pick<ApiKeyRecord, 'expires_at' | 'revoked_at'>, now: Date): ApiKeyStatus {
  if (key.revoked_at) return ApiKeyStatus.revoked;
  if (key.expires_at && key.expires_at.getTime() <= now.getTime()) return ApiKeyStatus.expired;
  return ApiKeyStatus.active;
}

export function apiKeyView(key: ApiKeyRecord, now: Date): ApiKeyView {
  return {
    id: key.id,
    workspaceId: key.workspace_id,
    name: key.name,
    hint: `vbt_${key.prefix}_…`,
    status: apiKeyStatus(key, now),
    createdAt: key.created_at.toISOString(),
    lastUsedAt: key.last_used_at?.toISOString() ?? null,
    expiresAt: key.expires_at?.toISOString() ?? null,
    revokedAt: key.revoked_at?.toISOString() ?? null,
    userId: key.user_id,
    scopes: key.scopes,
  };
}

export interface NewKeyRequest {
  name: string;
  expiresAt: Date | null;
  /** null: the maker's own scopes. */
  scopes: Scope[] | null;
}

const MAX_NAME = 100;

/** `POST /v1/api-keys`: `{"name"?: string, "expiresAt"?: ISO 8601 time in the future}`; no body is fine. */
export function parseNewKeyRequest(body: unknown, now: Date): NewKeyRequest {
  if (body === undefined || body === null) return { name: 'api', expiresAt: null, scopes: null };
  if (typeof body !== 'object' || Array.isArray(body))
    throw invalid('api_key.body', 'the body must be a JSON object');
  const { name, expiresAt, scopes, ...rest } = body as Record<string, unknown>;
  const unknownFields = Object.keys(rest);
  if (unknownFields.length > 0) {
    throw invalid(
      'api_key.unknown_field',
      `unknown field ${unknownFields[0]}; allowed: name, expiresAt, scopes`,
    );
  }
  let label = 'api';
  if (name !== undefined) {
    if (typeof name !== 'string' || name.trim() === '' || name.length > MAX_NAME) {
      throw invalid('api_key.name', `name must be a non-empty string of at most ${MAX_NAME} characters`);
    }
    label = name.trim();
  }
  return { name: label, expiresAt: parseExpiry(expiresAt, now), scopes: parseScopes(scopes) };
}

function parseScopes(value: unknown): Scope[] | null {
  if (value === undefined || value === null) return null;
  if (!Array.isArray(value) || value.length === 0 || !value.every(isScope)) {
    throw invalid('api_key.scopes', `scopes must be a non-empty list of ${SCOPES.join(', ')}`);
  }
  return SCOPES.filter((s) => value.includes(s));
}

function parseExpiry(value: unknown, now: Date): Date | null {
  if (value === undefined || value === null) return null;
  // A full date-time with a zone, so "2030-01-01" cannot silently mean midnight in the server's zone.
  const iso = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/;
  const at = typeof value === 'string' && iso.test(value) ? new Date(value) : null;
  if (!at || Number.isNaN(at.getTime())) {
    throw invalid(
      'api_key.expires_at',
      'expiresAt must be an ISO 8601 date-time with a zone, e.g. 2030-01-31T00:00:00Z',
    );
  }
  if (at.getTime() <= now.getTime()) throw invalid('api_key.expires_at', 'expiresAt must be in the future');
  return at;
}

function invalid(code: string, message: string): AppError {
  return new AppError(ErrorKind.invalidInput, code, message);
}
