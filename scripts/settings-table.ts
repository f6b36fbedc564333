/**
 * The README's settings tables, generated from the settings declared in src/config.ts: one table
 * per group, in declaration order, then the internal settings in a sentence. They sit between two
 * marker comments in README.md; `npm run docs:settings` rewrites that region, and
 * test/settings-readme.test.ts fails when it differs from what this produces.
 */
import fs from 'node:fs';
import path from 'node:path';
import * as prettier from 'prettier';
import { ALL_SETTINGS } from '../src/config.ts';
import type { Setting } from '../src/settings.ts';

export const README = path.resolve(import.meta.dirname, '..', 'README.md');
export const START =
  '<!-- settings:start: generated from src/config.ts by `npm run docs:settings`; edit there -->';
export const END = '<!-- settings:end -->';

const cell = (text: string): string => text.replaceAll('|', '\\|');
const code = (text: string): string => (text === '' ? '(empty)' : `\`${text}\``);

/** The region's markdown (unformatted; `readmeWithSettings` formats it as prettier does). */
export function settingsMarkdown(settings: readonly Setting<unknown>[] = ALL_SETTINGS): string {
  const groups = new Map<string, Setting<unknown>[]>();
  const internal: Setting<unknown>[] = [];
  for (const s of settings) {
    if (s.internal) {
      internal.push(s);
      continue;
    }
    if (s.group === undefined) throw new Error(`${s.env} is in no README group: declare it inside group()`);
    groups.set(s.group, [...(groups.get(s.group) ?? []), s]);
  }
  const parts: string[] = [];
  for (const [title, members] of groups) {
    parts.push(`### ${title}`);
    parts.push(
      [
        '| variable | default | values | what it sets |',
        '| --- | --- | --- | --- |',
        ...members.map(
          (s) => `| \`${s.env}\` | ${cell(code(s.default))} | ${cell(s.kind.values)} | ${cell(s.help)} |`,
        ),
      ].join('\n'),
    );
  }
  if (internal.length > 0) {
    parts.push('Set by Verbatim itself or by its tests, never by an operator:');
    parts.push(internal.map((s) => `- \`${s.env}\`: ${s.help}`).join('\n'));
  }
  return parts.join('\n\n');
}

/** `readme` with its settings region replaced by the generated one, formatted as `npm run format` would. */
export async function readmeWithSettings(readme: string): Promise<string> {
  const start = readme.indexOf(START);
  const end = readme.indexOf(END);
  if (start < 0 || end < start) throw new Error(`README.md lacks the markers ${START} … ${END}`);
  const spliced = `${readme.slice(0, start + START.length)}\n\n${settingsMarkdown()}\n\n${readme.slice(end)}`;
  const options = (await prettier.resolveConfig(README)) ?? {};
  return prettier.format(spliced, { ...options, filepath: README });
}

/** The text between the markers (for a short diff in the test). */
export function settingsRegion(readme: string): string {
  return readme.slice(readme.indexOf(START), readme.indexOf(END) + END.length);
}

export async function writeReadme(): Promise<boolean> {
  const readme = fs.readFileSync(README, 'utf8');
  const next = await readmeWithSettings(readme);
  if (next === readme) return false;
  fs.writeFileSync(README, next);
  return true;
}
