import type { ToolPolicy, ToolPreset } from '../config/schema.ts';

/** The built-in groups of SPEC §11, §15 and §17. MCP servers add `mcp:<server>` groups at run time. */
export const BUILTIN_GROUPS: Readonly<Record<string, readonly string[]>> = {
  'group:sessions': ['sessions_spawn', 'sessions_yield', 'sessions'],
  'group:memory': ['memory_write', 'memory_search'],
  'group:media': ['send_file'],
  /** Only in preset `full` (or named in `allow`). */
  'group:schedule': ['schedule'],
};

/** The groups each preset enables; `full` enables every registered tool. */
const PRESET_GROUPS: Readonly<Record<Exclude<ToolPreset, 'full'>, readonly string[]>> = {
  none: [],
  minimal: ['group:memory'],
  messaging: ['group:sessions', 'group:memory', 'group:media'],
};

/** What a policy is resolved against: every registered tool and the group each is in. */
export interface ToolCatalogue {
  names: readonly string[];
  groupOf(name: string): string | undefined;
}

/**
 * The names a policy enables: the preset's tools, plus `allow`, minus `deny` (both take tool names and
 * `group:`/`mcp:` names). The result keeps the catalogue's order so the request bytes stay stable.
 */
export function enabledToolNames(policy: ToolPolicy, catalogue: ToolCatalogue): string[] {
  const matches = (name: string, selector: string) => selector === name || catalogue.groupOf(name) === selector;
  const inPreset = (name: string) => policy.preset === 'full' || PRESET_GROUPS[policy.preset].some((g) => matches(name, g));
  return catalogue.names.filter((name) =>
    (inPreset(name) || policy.allow.some((s) => matches(name, s))) && !policy.deny.some((s) => matches(name, s)));
}

/**
 * Whether a policy would enable tools of a group that is not registered yet (an MCP server still connecting),
 * judged without its tool names: `full`, or `allow` naming the group or a tool with its prefix (`<server>__`),
 * unless `deny` names the whole group.
 */
export function policyMayInclude(policy: ToolPolicy, group: string, toolPrefix: string): boolean {
  if (policy.deny.includes(group)) return false;
  return policy.preset === 'full' || policy.allow.some((s) => s === group || s.startsWith(toolPrefix));
}
