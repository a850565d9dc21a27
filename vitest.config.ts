import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    // Build dist/ first: pipeline files and the command line, as users run them, import the built package.
    globalSetup: ['test/global-setup.ts', 'test/postgres/pg-setup.ts'],
    // Many tests start several processes (each loads Node and the package): on a loaded 2-core machine that can take
    // longer than vitest's default 5 s without anything being wrong. A timeout is for a hang, not a slow machine.
    testTimeout: 60_000,
  },
});
