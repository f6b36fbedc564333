/**
 * The CLI as an install runs it: `dist/cli/main.js`, compiled by `npm run build` (scripts/setup.sh
 * runs it). The processes tests and the simulation start run it when it is at least as new as
 * every source file; otherwise the sources through tsx, which cost about twice the CPU to load
 * (2.8 against 1.5 CPU-s per process on the CI machine), so a stale build is never run.
 */
import fs from 'node:fs';
import path from 'node:path';

const ROOT = path.resolve(import.meta.dirname, '..');
export const BUILT_CLI = path.join(ROOT, 'dist/cli/main.js');
export const SOURCE_CLI = path.join(ROOT, 'src/cli/main.ts');

function newestSource(dir: string): number {
  let newest = 0;
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestSource(full));
    else if (entry.name.endsWith('.ts')) newest = Math.max(newest, fs.statSync(full).mtimeMs);
  }
  return newest;
}

/** Whether dist/cli/main.js exists and no source under src/ changed after it was built. */
export function builtCliIsFresh(): boolean {
  let built: number;
  try {
    built = fs.statSync(BUILT_CLI).mtimeMs;
  } catch {
    return false;
  }
  return newestSource(path.join(ROOT, 'src')) <= built;
}

let fresh: boolean | null = null;

/** The node arguments that start the CLI: the fresh build, else the sources through tsx. */
export function cliArgs(): string[] {
  fresh ??= builtCliIsFresh();
  return fresh ? [BUILT_CLI] : ['--import', 'tsx', SOURCE_CLI];
}
