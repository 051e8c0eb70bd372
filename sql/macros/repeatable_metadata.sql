-- repeatable_metadata(uuid, native_type): whether a line is session metadata that the client writes
-- again at each turn or exit (ai-title, last-prompt, mode, permission-mode, ...): a line without uuid
-- of one of these types. Such a line repeating the previous value of its type is not a change
-- (observation_index.sql, registry entry "Repeated metadata"); its value is hashed without the fields
-- that change at every write (observations.sql, json_hash).
create or replace temp macro repeatable_metadata(uuid, native_type) as
    uuid is null and native_type in (
        'summary', 'ai-title', 'custom-title', 'agent-name', 'tag', 'last-prompt', 'pr-link',
        'worktree-state', 'continued-in', 'fork-context-ref', 'agent-color', 'agent-setting',
        'permission-mode', 'mode', 'bridge-session', 'atis-latch'
    )
