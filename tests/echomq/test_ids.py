import threading

import pytest

from echomq import ids


def test_public_vector_and_bounds():
    assert ids.encode("USR", 274557032793636864) == "USR0KHTOWnGLuC"
    assert ids.parse("USR0KHTOWnGLuC") == ("USR", 274557032793636864)
    assert ids.encode("JOB", 0) == "JOB00000000000"
    assert ids.encode("JOB", 2**63 - 1) == "JOBAzL8n0Y58m7"
    assert ids.parse("JOBAzL8n0Y58m7") == ("JOB", 2**63 - 1)


@pytest.mark.parametrize("bad", [
    "JOBAzL8n0Y58m8",        # one past 2^63-1
    "JOBzzzzzzzzzzz",        # far past
    "job0KHTOWnGLuC",        # lower-case brand
    "JO0KHTOWnGLuCx",        # brand with a digit
    "JOB0KHTOWnGLu",         # 13 bytes
    "JOB0KHTOWnGLuC0",       # 15 bytes
    "JOB0KHTOWn-LuC",        # outside the alphabet
    "JOB0KHTOWnGLu\u00e9",   # non-ASCII
    "", None, 42, b"\xff" * 14,
])
def test_ill_formed_ids_are_refused(bad):
    assert not ids.is_valid(bad)
    with pytest.raises(ValueError):
        ids.parse(bad)


@pytest.mark.parametrize("brand,n", [("jOB", 1), ("JOBS", 1), ("JOB", -1), ("JOB", 2**63), ("JOB", 1.0)])
def test_encode_refuses_out_of_range(brand, n):
    with pytest.raises(ValueError):
        ids.encode(brand, n)


@pytest.mark.parametrize("brand", ["jOB", "JOBS", "", None, 42, ["JOB"], b"JOB"])
def test_mint_refuses_a_bad_brand_with_the_library_error(brand):
    with pytest.raises(ids.InvalidName):
        ids.mint(brand)
    with pytest.raises(ids.InvalidName):  # and again: a refused brand is never remembered as good
        ids.mint(brand)


def test_mint_order_is_integer_and_byte_order():
    minted = [ids.mint("JOB") for _ in range(5000)]
    ns = [ids.parse(m)[1] for m in minted]
    assert ns == sorted(ns) and len(set(ns)) == len(ns)
    assert minted == sorted(minted)
    assert [m.encode() for m in minted] == sorted(m.encode() for m in minted)


def test_mint_order_is_sorted_set_order(r):
    minted = [ids.mint("JOB") for _ in range(2000)]
    r.zadd("order", {m: 0 for m in reversed(minted)})
    assert [m.decode() for m in r.zrange("order", 0, -1)] == minted


def test_minter_survives_a_clock_that_steps_back_and_a_full_sequence():
    t = [10_000 * 1_000_000 + ids.EPOCH_MS * 1_000_000]
    m = ids.Minter(node=7, clock=lambda: t[0])
    seen = [m.next_n() for _ in range(ids.MAX_SEQ + 10)]  # overflow borrows a millisecond
    t[0] -= 5_000 * 1_000_000                              # clock steps back 5 s
    seen += [m.next_n() for _ in range(10)]
    assert seen == sorted(seen) and len(set(seen)) == len(seen)
    assert all((n >> 12) & ids.MAX_NODE == 7 for n in seen)
    # 2048 per millisecond, then the next: the sequence's top bit is the schedules' (tick ids)
    assert [n & ids.MAX_SEQ for n in seen[2046:2050]] == [2046, 2047, 0, 1]
    assert max(n & ids.MAX_SEQ for n in seen) == ids.MAX_MINT_SEQ == 2047


def test_minting_is_thread_safe():
    m = ids.Minter(node=1)
    out: list[list[int]] = [[] for _ in range(8)]

    def work(i):
        out[i] = [m.next_n() for _ in range(2000)]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    flat = [n for chunk in out for n in chunk]
    assert len(set(flat)) == len(flat)
    assert all(chunk == sorted(chunk) for chunk in out)


def test_node_id_is_configurable():
    assert ids.parse(ids.Minter(node=1023).mint("JOB"))[1] >> 12 & 1023 == 1023
    with pytest.raises(ValueError):
        ids.Minter(node=1024)


BAD_JOB_IDS = ["JOBAzL8n0Y58m8", "JOBzzzzzzzzzzz", "job0KHTOWnGLuC", "JO0KHTOWnGLuCx", "JOB0KHTOWnGLu",
               "JOB0KHTOWnGLuC0", "JOB0KHTOWn-LuC", "JOB0KHTOWnGLu\u00e9", "", None, 42, b"JOB0KHTOWnGLuC",
               "USR0KHTOWnGLuC", "JOB0KHTOWnGLu\n", "\nJOB0KHTOWnGLu"]


@pytest.mark.parametrize("bad", BAD_JOB_IDS)
@pytest.mark.parametrize("at", [0, 1, 2])
def test_all_valid_refuses_a_list_with_one_bad_id_anywhere(bad, at):
    good = [ids.mint("JOB") for _ in range(2)] + ["JOBAzL8n0Y58m7", "JOB00000000000"]
    assert ids.all_valid(good, "JOB")
    strings = good[:at] + [bad] + good[at:]
    assert not ids.all_valid(strings, "JOB")
    assert not ids.all_valid([bad], "JOB")


def test_all_valid_is_not_fooled_by_ids_smuggled_across_items_by_newlines():
    a, b, c = (ids.mint("JOB") for _ in range(3))
    # joined, each of these reads as well-formed ids separated by newlines
    for strings in ([f"{a}\n{b}"], [f"{a}\n{b}", c], [a, f"{b}\n{c}"], ["", f"{a}\n{b}"], [f"{a}\n", b]):
        assert not ids.all_valid(strings, "JOB"), strings
    assert ids.all_valid([a, b, c], "JOB") and not ids.all_valid([a, b, c], "USR")
