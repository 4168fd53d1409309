#!/usr/bin/env node
// Runs the compiled build (dist/, made by `npm run build`, which `npm install` runs) when it is at least as
// new as every source file; otherwise the TypeScript sources through tsx's loader, so an edited checkout
// never runs stale code and `npm install && npm start` needs no manual step either way.
import { existsSync, readdirSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const stamp = path.join(root, 'dist', '.build-stamp');

function newestSource(dir) {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestSource(full));
    else newest = Math.max(newest, statSync(full).mtimeMs);
  }
  return newest;
}

function buildIsFresh() {
  if (!existsSync(stamp)) return false;
  const built = statSync(stamp).mtimeMs;
  return ['src', 'channels'].every((dir) => newestSource(path.join(root, dir)) <= built);
}

if (buildIsFresh()) {
  await import('../dist/src/cli.js');
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import('../src/cli.ts');
}
