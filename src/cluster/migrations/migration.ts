/** One step of the cluster database's schema (SPEC §13). */
export interface Migration {
  /** Sortable and unique: `NNN-name`. */
  id: string;
  sql: string;
}
