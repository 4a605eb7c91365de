import gc

from grasp_core.gc_pause import collector_paused


def test_the_collector_is_paused_in_the_block_and_resumed_as_it_was():
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner block leaves the outer one's pause alone
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()  # not turned on when it was off
    finally:
        gc.enable()
