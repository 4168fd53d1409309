// `npm run build`: compiles src/ and channels/ to dist/, copies the dashboard assets, and stamps the build
// (bin/switchboard.mjs runs dist/ only while the stamp is newer than every source file).
import { execFileSync } from 'node:child_process';
import { cpSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const stamp = path.join(root, 'dist', '.build-stamp');
rmSync(stamp, { force: true });
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
execFileSync(process.execPath, [tsc, '-p', path.join(root, 'tsconfig.build.json')], { stdio: 'inherit' });
cpSync(path.join(root, 'src/http/assets'), path.join(root, 'dist/src/http/assets'), { recursive: true });
writeFileSync(stamp, `${new Date().toISOString()}\n`);
