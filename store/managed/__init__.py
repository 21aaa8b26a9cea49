"""store/managed"""
