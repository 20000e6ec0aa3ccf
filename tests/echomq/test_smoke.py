from echomq import Queue, ids


def test_enqueue_claim_complete(any_server):
    q = Queue("smoke", any_server)
    jid, status = q.enqueue(b"hi")
    assert status == "enqueued"
    job = q.claim(lease_ms=1000)
    assert job.id == jid and job.payload == b"hi" and job.attempts == 1
    assert q.complete(job.id, job.attempts) is True
    assert q.counts()["completed"] == 1
    lane = ids.mint("PLR")
    q.enqueue(b"x", lane=lane)
    job = q.claim(lease_ms=1000)
    assert job.lane == lane
