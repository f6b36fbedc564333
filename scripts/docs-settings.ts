/**
 * `npm run docs:settings`: rewrites the README's settings tables from the declaration in
 * src/config.ts (scripts/settings-table.ts).
 */
import { writeReadme } from './settings-table.ts';

console.log(
  (await writeReadme()) ? 'README.md: settings tables rewritten' : 'README.md: settings tables up to date',
);
