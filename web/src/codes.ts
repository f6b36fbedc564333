// Types only (erased from the bundle): the codes are declared once, in the server's domain.
import type { ClientCode } from '../../src/domain/client-codes.ts';

/**
 * Whether an answer's code is `expected`, one of the codes the server promises its clients
 * (src/domain/client-codes.ts): a misspelt or retired code fails the web app's typecheck.
 */
export function codeIs(code: string | null | undefined, expected: ClientCode): boolean {
  return code === expected;
}
