// V12: a plant that no longer applies to the tree proves nothing: a refactoring that moves the code
// a plant breaks must move the plant with it (npm run sim -- --plant NAME would only refuse then).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { it } from 'node:test';
import { listPlants } from '../sim/plants.ts';

void it('V12: every plant under sim/plants applies to the current tree', () => {
  const plants = listPlants();
  assert.ok(plants.length >= 10, `${plants.length} plants`);
  const root = path.resolve(import.meta.dirname, '..');
  const stale: string[] = [];
  for (const p of plants) {
    try {
      execFileSync('git', ['apply', '--check', p.file], { cwd: root, stdio: 'pipe' });
    } catch (err) {
      stale.push(`${p.name}: ${String((err as { stderr?: Buffer }).stderr ?? err).trim()}`);
    }
  }
  assert.deepEqual(stale, [], 'plants that no longer apply (regenerate them against the tree)');
});
