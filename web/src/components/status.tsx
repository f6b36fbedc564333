import type { Meeting } from '../api.ts';

const LABEL: Record<Meeting['status'], string> = {
  created: 'Created',
  recording: 'Recording',
  processing: 'Transcribing',
  finalizing: 'Finalizing',
  complete: 'Complete',
  failed: 'Failed',
};

export function StatusBadge({ meeting }: { meeting: Meeting }) {
  const noMinutes = meeting.status === 'complete' && meeting.minutes.status !== 'written';
  return (
    <span class={`badge ${meeting.status}`} data-status={meeting.status}>
      {LABEL[meeting.status]}
      {noMinutes ? ' · no minutes' : ''}
    </span>
  );
}
