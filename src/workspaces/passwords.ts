import { hash, verify } from '@node-rs/argon2';
import { AppError, ErrorKind } from '../domain/errors.ts';

/**
 * U2: local passwords, hashed with argon2id (OWASP's minimum: 19 MiB, 2 passes, 1 lane), a salt of
 * their own each. A sign-in for an email that is no user's still verifies against a hash, so its
 * answer takes as long as a wrong password's.
 */
const OPTIONS = { algorithm: 2 /* Argon2id */, memoryCost: 19_456, timeCost: 2, parallelism: 1 } as const;

export const MIN_PASSWORD = 12;
const MAX_PASSWORD = 1024;

export function checkNewPassword(password: unknown): string {
  if (typeof password !== 'string' || password.length < MIN_PASSWORD || password.length > MAX_PASSWORD) {
    throw new AppError(
      ErrorKind.invalidInput,
      'user.password',
      `password must be a string of ${MIN_PASSWORD} to ${MAX_PASSWORD} characters`,
    );
  }
  return password;
}

export function hashPassword(password: string): Promise<string> {
  return hash(password, OPTIONS);
}

let dummy: Promise<string> | null = null;

/** Whether `password` is the one `stored` hashes; with no stored hash, the same work and false. */
export async function passwordMatches(stored: string | null, password: string): Promise<boolean> {
  if (stored === null) {
    dummy ??= hash('not a password of anyone', OPTIONS);
    await verify(await dummy, password).catch(() => false);
    return false;
  }
  return verify(stored, password).catch(() => false);
}
