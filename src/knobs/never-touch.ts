// Settings that no path of the agent may ever change, whatever the tuning service says:
// durability, security, replication and recovery, data integrity, logging, and settings
// applications can see. A faster database that can lose committed data, accept connections it
// should refuse, or behave differently for the application is not a tuning result.
//
// validateChange checks this list before the catalog, so even a catalog mistake cannot let one
// of these through; a test asserts that no catalog knob matches it. Built from PostgreSQL 15's
// GUC list (guc.c) plus the names later releases and the managed services add.

export type NeverTouchCategory =
  | 'durability'
  | 'replication-recovery'
  | 'security'
  | 'integrity'
  | 'availability'
  | 'application-visible'
  | 'logging'
  | 'observability'
  | 'developer'
  | 'platform';

export interface NeverTouchEntry {
  /** A setting name, or a prefix ending in '*' (e.g. 'ssl*', 'log_*'). */
  readonly pattern: string;
  readonly category: NeverTouchCategory;
  readonly reason: string;
}

const entry = (category: NeverTouchCategory, reason: string, ...patterns: string[]): NeverTouchEntry[] =>
  patterns.map((pattern) => ({ pattern, category, reason }));

export const NEVER_TOUCH: readonly NeverTouchEntry[] = [
  ...entry(
    'durability',
    'it decides whether committed data survives a crash',
    'fsync',
    'synchronous_commit',
    'full_page_writes',
    'wal_sync_method',
    'wal_level',
    'wal_log_hints',
    'data_sync_retry',
    'synchronous_standby_names',
    'recovery_init_sync_method',
  ),
  ...entry(
    'replication-recovery',
    'it controls archiving, replication or recovery, which backups and standbys depend on',
    'archive_*',
    'restore_command',
    'recovery_*',
    'primary_conninfo',
    'primary_slot_name',
    'promote_trigger_file',
    'hot_standby',
    'hot_standby_feedback',
    'max_wal_senders',
    'max_replication_slots',
    'max_logical_replication_workers',
    'max_sync_workers_per_subscription',
    'max_parallel_apply_workers_per_subscription',
    'wal_keep_size',
    'max_slot_wal_keep_size',
    'wal_sender_timeout',
    'wal_receiver_*',
    'wal_retrieve_retry_interval',
    'max_standby_archive_delay',
    'max_standby_streaming_delay',
    'vacuum_defer_cleanup_age',
    'track_commit_timestamp',
    'sync_replicated_slots',
    'synchronized_standby_slots',
    'summarize_wal',
    'wal_summary_keep_time',
  ),
  ...entry(
    'security',
    'it is a security setting: authentication, encryption, network exposure or what code the server loads',
    'ssl*',
    'password_encryption',
    'scram_iterations',
    'md5_password_warnings',
    'hba_file',
    'ident_file',
    'krb_*',
    'gss_accept_delegation',
    'db_user_namespace',
    'authentication_timeout',
    'listen_addresses',
    'port',
    'unix_socket_*',
    'bonjour*',
    'shared_preload_libraries',
    'local_preload_libraries',
    'session_preload_libraries',
    'dynamic_library_path',
    'extension_destdir',
    'jit_provider',
    'lo_compat_privileges',
    'row_security',
    'createrole_self_grant',
    'allow_alter_system',
    'restrict_nonsystem_relation_kind',
    'event_triggers',
    'oauth_*',
    'pgaudit.*',
    'rds.force_ssl',
    'rds.rest*',
    'rds.accepted_password_auth_method',
    'require_secure_transport',
    'azure.extensions',
    'cloudb.extensions',
  ),
  ...entry(
    'integrity',
    'it can corrupt data, hide corruption, or let transaction-ID wraparound happen',
    'zero_damaged_pages',
    'ignore_checksum_failure',
    'ignore_invalid_pages',
    'ignore_system_indexes',
    'allow_system_table_mods',
    'allow_in_place_tablespaces',
    'data_checksums',
    'session_replication_role',
    'autovacuum',
    'autovacuum_freeze_max_age',
    'autovacuum_multixact_freeze_max_age',
    'vacuum_failsafe_age',
    'vacuum_multixact_failsafe_age',
    'old_snapshot_threshold',
    'track_counts',
  ),
  ...entry(
    'developer',
    'it is a developer option, never meant for a production server',
    'debug_*',
    'trace_*',
    'wal_consistency_checking',
    'jit_debugging_support',
    'jit_profiling_support',
    'jit_dump_bitcode',
    'post_auth_delay',
    'pre_auth_delay',
  ),
  ...entry(
    'availability',
    'a wrong value can stop the server from starting or keep it down after a crash',
    'data_directory',
    'config_file',
    'external_pid_file',
    'data_directory_mode',
    'wal_init_zero',
    'huge_pages',
    'huge_page_size',
    'shared_memory_type',
    'dynamic_shared_memory_type',
    'restart_after_crash',
    'exit_on_error',
    'remove_temp_files_after_crash',
    'max_files_per_process',
    'cluster_name',
    'event_source',
  ),
  ...entry(
    'application-visible',
    'applications can see it: changing it changes what they may do or what results they get',
    'max_connections',
    'superuser_reserved_connections',
    'reserved_connections',
    'max_prepared_transactions',
    'max_locks_per_transaction',
    'max_pred_locks_per_*',
    'statement_timeout',
    'lock_timeout',
    'idle_in_transaction_session_timeout',
    'idle_session_timeout',
    'transaction_timeout',
    'default_transaction_*',
    'transaction_*',
    'search_path',
    'standard_conforming_strings',
    'backslash_quote',
    'escape_string_warning',
    'client_encoding',
    'datestyle',
    'intervalstyle',
    'timezone',
    'timezone_abbreviations',
    'lc_*',
    'default_text_search_config',
    'default_table_access_method',
    'default_tablespace',
    'temp_tablespaces',
    'temp_file_limit',
    'check_function_bodies',
    'array_nulls',
    'quote_all_identifiers',
    'transform_null_equals',
    'extra_float_digits',
    'bytea_output',
    'xmlbinary',
    'xmloption',
    'integer_datetimes',
    'default_toast_compression',
    'tcp_*',
    'client_connection_check_interval',
  ),
  ...entry('logging', "the agent never changes logging behind the operator's back", 'log_*', 'logging_collector', 'syslog_*'),
  ...entry(
    'observability',
    'the agent and the operator measure the workload with it',
    'pg_stat_statements.*',
    'compute_query_id',
    'track_activities',
    'track_activity_query_size',
    'track_functions',
    'track_io_timing',
    'track_wal_io_timing',
    'stats_fetch_consistency',
    'update_process_title',
    'application_name',
  ),
  ...entry('platform', "managed-service internals are the provider's to set", 'rds.*', 'aurora*', 'apg_*', 'azure.*', 'cloudb.*', 'pgms_*'),
];

function matches(pattern: string, name: string): boolean {
  return pattern.endsWith('*') ? name.startsWith(pattern.slice(0, -1)) : name === pattern;
}

/** The never-touch entry that covers `name` (case-insensitive, as PostgreSQL treats names), if any. */
export function neverTouchEntry(name: string): NeverTouchEntry | undefined {
  const lower = name.trim().toLowerCase();
  return NEVER_TOUCH.find((e) => matches(e.pattern, lower));
}

export function isNeverTouch(name: string): boolean {
  return neverTouchEntry(name) !== undefined;
}
