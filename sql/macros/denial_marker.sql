-- denial_marker(text): the denial a tool result's text marks, {denial_kind, permission, decided_by,
-- reason}, or null when the text starts with no marker below. Before results carried
-- permissionDecision and toolDenialKind (none up to 2.1.199), Claude Code recorded a person's
-- rejection only as a fixed text; tool_calls.sql reads it from an error result that records neither
-- field (permission_evidence text_marker). A marker is the start of the whole text, exactly as
-- Claude Code writes it, so an output that merely quotes the sentence is not one.
-- denial_kind uses toolDenialKind's values, so it sets the status as that field does; permission
-- and decided_by are what permissionDecision's registry mapping gives for the same decision (a
-- rejection: reject with source user_reject; a cancellation: user_abort; an interruption is no
-- decision). reason: for a marker Claude Code ends before appending what the user said, the rest
-- of the text, verbatim.
-- Versions seen (tests/fixtures/corpus): the rejection 1.0.17-2.1.185 (2.1.185 appends a note
-- after it); with the user's reason 2.0.42 (older wording) and 2.1.179; the cancellation of the
-- turn's other calls 1.0.17-2.0.42; the interruption only as a user line after a rejection (a
-- message, not a result; the form of a result is authored, tests/fixtures/registry/core/denials).
create or replace temp macro denial_marker(text) as list_transform(
    list_filter(
        [
            {
                'marker': 'The user doesn''t want to proceed with this tool use. The tool use was rejected (eg. if it was a file edit, the new_string was NOT written to the file). STOP what you are doing and wait for the user to tell you how to proceed.',
                'denial_kind': 'user-rejected', 'permission': 'reject_once', 'decided_by': 'user', 'has_reason': false,
            },
            {
                'marker': 'The user doesn''t want to proceed with this tool use. The tool use was rejected (eg. if it was a file edit, the new_string was NOT written to the file). To tell you how to proceed, the user said:' || chr(10),
                'denial_kind': 'user-rejected', 'permission': 'reject_once', 'decided_by': 'user', 'has_reason': true,
            },
            {
                'marker': 'The user doesn''t want to proceed with this tool use. The tool use was rejected (eg. if it was a file edit, the new_string was NOT written to the file). The user provided the following reason for the rejection: ',
                'denial_kind': 'user-rejected', 'permission': 'reject_once', 'decided_by': 'user', 'has_reason': true,
            },
            {
                'marker': 'The user doesn''t want to take this action right now. STOP what you are doing and wait for the user to tell you how to proceed.',
                'denial_kind': 'cancelled', 'permission': 'reject_once', 'decided_by': 'user', 'has_reason': false,
            },
            {
                'marker': '[Request interrupted by user for tool use]',
                'denial_kind': 'interrupted', 'permission': null, 'decided_by': null, 'has_reason': false,
            },
        ],
        lambda m: starts_with(text, m.marker)
    ),
    lambda m: {
        'denial_kind': m.denial_kind, 'permission': m.permission, 'decided_by': m.decided_by,
        'reason': case when m.has_reason then substr(text, length(m.marker) + 1) end,
    }
)[1]
