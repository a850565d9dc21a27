import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    // Build dist/ first: pipeline files and the command line, as users run them, import the built package.
    globalSetup: ['test/global-setup.ts'],
  },
});
