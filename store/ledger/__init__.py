"""store/ledger"""
