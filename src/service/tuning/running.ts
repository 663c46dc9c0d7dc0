// Which databases have a running session, as this replica last saw it (one per service, in its
// ServiceContext): the report path (hundreds
// a second) skips its storage lookup for every other database. A cache, not state: the timer
// refreshes it from the storage every tick, and this replica's own starts are seen at once, so a
// session started on another replica is picked up within a tick (its baseline then begins with
// the first report after its start, as always). A stale entry costs one lookup, nothing more.

export class RunningSessions {
  private databases = new Set<string>();
  /** When each database was added here, so that a refresh read before that does not drop it. */
  private readonly addedAt = new Map<string, number>();

  has(databaseId: string): boolean {
    return this.databases.has(databaseId);
  }

  add(databaseId: string): void {
    this.databases.add(databaseId);
    this.addedAt.set(databaseId, performance.now());
  }

  delete(databaseId: string): void {
    this.databases.delete(databaseId);
    this.addedAt.delete(databaseId);
  }

  /** The storage's list, read at `readAt` (performance.now()), plus what was added since. */
  refresh(databaseIds: readonly string[], readAt: number): void {
    const next = new Set(databaseIds);
    for (const [id, at] of this.addedAt) {
      if (at >= readAt) next.add(id);
      else this.addedAt.delete(id);
    }
    this.databases = next;
  }
}
