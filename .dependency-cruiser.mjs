// The import rules of docs/architecture.md ("Layers"), checked by `npm run lint:imports` (part of `npm run lint`).
// Type-only imports count: a circle through types is still a circle.

/**
 * The layers of src/, lowest first. A module may import its own layer and those before it, never one after
 * it: ports are defined low (sessions/, routing/, gateway/), src/cluster/ implements them, and the wiring on
 * top (src/main.ts, src/stores.ts, src/http/, the CLI) picks the implementations and passes them in.
 */
const LAYERS = [
  ['core', '^src/core/'],
  ['tokens', '^src/tokens/'],
  ['config', '^src/config/'],
  ['media', '^src/media/'],
  ['routing', '^src/routing/'],
  ['sessions', '^src/sessions/'],
  ['providers', '^src/providers/'],
  ['tools', '^src/tools/'],
  ['agent', '^src/agent/'],
  ['scheduler', '^src/scheduler/'],
  ['accounting', '^src/accounting/'],
  ['gateway', '^src/gateway/'],
  ['cluster', '^src/cluster/'],
  ['wiring', '^src/(http/|cli/|cli\\.ts$|main\\.ts$|stores\\.ts$|housekeeping\\.ts$|scheduled-work\\.ts$|http-app-wiring\\.ts$)'],
];

const layerRules = LAYERS.slice(0, -1).map(([name, path], i) => ({
  name: `layer-${name}`,
  severity: 'error',
  comment: `src/${name}/ may import only ${LAYERS.slice(0, i + 1).map(([n]) => n).join(', ')} (docs/architecture.md, "Layers")`,
  from: { path },
  to: { path: LAYERS.slice(i + 1).map(([, p]) => p) },
}));

/** @type {import('dependency-cruiser').IConfiguration} */
export default {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'No import circles, type-only ones included: move the shared types down to a module both sides use.',
      from: {},
      to: { circular: true },
    },
    ...layerRules,
    {
      name: 'channels-only-core',
      severity: 'error',
      comment: 'channels/* import only src/core and src/config (types) from src/, and their platform SDK.',
      from: { path: '^channels/' },
      to: { path: '^src/', pathNot: '^src/(core|config)/' },
    },
    {
      name: 'src-not-channels',
      severity: 'error',
      comment: 'src/* never imports channels/*, except src/main.ts and src/cli/chat.ts (which runs channels/cli in-process).',
      from: { path: '^src/', pathNot: '^src/(main\\.ts|cli/chat\\.ts)$' },
      to: { path: '^channels/' },
    },
    {
      name: 'agent-parts-not-runtime',
      severity: 'error',
      comment: 'src/agent/context/ and src/agent/commands/ never import the runtime or the batch runner.',
      from: { path: '^src/agent/(context|commands)/' },
      to: { path: '^src/agent/(runtime|batch-runner)\\.ts$' },
    },
  ],
  options: {
    includeOnly: '^(src|channels)/',
    // The dashboard's browser modules import nothing of the server.
    exclude: { path: '^src/http/assets/' },
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
  },
};
