import { execFileSync } from 'node:child_process';
import { join } from 'node:path';

/**
 * Builds dist/ before the tests: pipeline files and the command line as users run them import the built package,
 * and a stale build would test yesterday's code.
 */
export default function setup(): void {
  // typescript's package exports do not include its bin: call it by path.
  const root = join(import.meta.dirname, '..');
  execFileSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', join(root, 'tsconfig.build.json')], { stdio: 'inherit' });
}
