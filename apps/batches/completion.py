"""A batch finishes where its runs finish: the step (or the cancel) that ends a batch's last run marks the batch
finished, in the same transaction. Reading a batch never writes."""
from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from apps.batches.models import Batch, BatchItem
from apps.runs.models import Run


def finish_batch_if_done(run_id: int) -> None:
    """Mark the run's batch finished when none of its runs is still going; nothing for a run outside any batch.
    Call it inside the transaction that ended the run, after saving the run: the batch's row lock orders two runs
    ending at once, so the later of them sees the earlier one's commit and finishes the batch."""
    batch_id = BatchItem.objects.filter(run_id=run_id).values_list("batch_id", flat=True).first()
    if batch_id is None:
        return
    with transaction.atomic():
        batch = Batch.objects.select_for_update().get(pk=batch_id)
        if batch.status != Batch.Status.RUNNING:
            return
        if Run.objects.filter(batch_item__batch=batch).exclude(status__in=Run.TERMINAL).exists():
            return
        batch.status, batch.finished_at = Batch.Status.FINISHED, timezone.now()
        batch.save(update_fields=["status", "finished_at"])
